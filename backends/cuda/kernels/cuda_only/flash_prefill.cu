// CUDA-only prefill attention in the FlashAttention-2 style (sm_80+, bf16/f16, head dim a
// multiple of 16 up to 128) for dense_attention, sparse_block_attention and
// patch_attention_3d on the native tier. Decode-sized calls keep decode_attention.cu
// (tried first by the ops); f32, the portable tier and the shapes refused below keep the
// wmma/FMA kernels.
//
// One thread block of 8 warps owns 128 query rows that share one KV head: tokens x the G
// query heads of the head (GQA packing: 8 tokens x 16 heads at G = 16), so every K/V tile
// read serves all of them. Warp w owns rows 16w..16w+15 as the M = 16 rows of mma.sync
// m16n8k16: its Q fragments stay in registers for the whole loop, S = Q K^T and the
// probabilities P stay in registers (the S accumulators, rounded to bf16/f16, are the A
// fragments of P V), the online softmax runs in registers in base 2 (scale * log2 e
// folded in, one quad shuffle pair per row and tile), and O accumulates in registers and
// is written once at the end (staged through shared memory for coalesced rows).
// K/V tiles of 64 keys stream through a cp.async pipeline (one barrier per tile) into
// padded shared rows read by ldmatrix (.trans for V) without bank conflicts.
// Rows past the valid keys are zero-filled by the copy (src-size 0), so NaN in cache
// slack never reaches an MMA; masking (key count, causal limit per row, sparse
// selection per row) is applied only on tiles that need it.
//
// Work: dense and sparse run one block per (token chunk of one sequence, KV head, split),
// latest chunks first (the longest causal ranges start early); tiles never cross a KV
// page (64-key tiles inside Bs-token blocks). Split-KV (few chunks, long context) writes
// f32 partials merged by launch_merge. Sparse blocks walk the union of the selections of
// their tokens' query blocks (sorted, deduplicated in shared memory) with a bit per local
// query block: a row attends a tile only if its query block selected the block (a warp
// whose rows all skip it does no math). patch_attention_3d runs persistent blocks over
// (128-token chunk of a window, head) items, keys strided by H * D.
// This file: the choice of kernel, splits and shapes, and the launches; the kernel is in
// flash_prefill_kernel.cuh.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backends/cuda/kernels/cuda_only/flash_prefill_kernel.cuh"
#include "backends/cuda/kernels/kv_splits.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"
#include "hal/env.h"

namespace msa::cuda {
namespace {

// ---- host side ---------------------------------------------------------------------------
// MSA_CUDA_FLASH=0 turns these kernels off (the wmma kernels run); MSA_CUDA_FLASH_SPARSE=0
// / MSA_CUDA_FLASH_PATCH=0 turn off one op (MSA_CUDA_FLASH_SPARSE=1: sparse at every Qb,
// see launch_flash_sparse); MSA_CUDA_FLASH_SPLITS=n forces n KV splits
// (testing the split path on small cases); MSA_CUDA_FLASH_MT=1 or 2 forces the row tiles
// per warp (A/B runs; 2 needs D = 128).
bool fa_enabled(int kind) {
  static const bool all = env_int("MSA_CUDA_FLASH", 1) != 0;
  static const bool sp = env_int("MSA_CUDA_FLASH_SPARSE", -1) != 0;
  static const bool pa = env_int("MSA_CUDA_FLASH_PATCH", 1) != 0;
  return all && (kind == kFaDense || (kind == kFaSparse && sp) || (kind == kFaPatch && pa));
}
int fa_forced_splits() {
  static const int n = std::clamp(env_int("MSA_CUDA_FLASH_SPLITS", 0), 0, kFaMaxSplits);
  return n;
}
// Row tiles per warp: 2 (half the shared-memory traffic per MMA) for D = 128 in dense and
// patch attention; sparse keeps 1, so a warp is one token's GQA group at G = 16
// and skips the blocks its token did not select.
int fa_mt(int kind, int D) {
  static const int forced = env_int("MSA_CUDA_FLASH_MT", 0);
  if (D != 128) return 1;  // MT 2 is compiled for D == 128 only
  if (forced == 1 || forced == 2) return forced;
  return kind == kFaSparse ? 1 : 2;
}

bool fa_ok(const Stream& st, int kind, hal::DType dt, int D, const void* q, const void* kc, const void* vc,
           const void* out) {
  if (!fa_enabled(kind) || !st.tuning().native() || st.props().cc_major < 8) return false;
  if (dt != hal::DType::bf16 && dt != hal::DType::f16) return false;
  if (D <= 0 || D > 128 || D % 16 != 0) return false;
  const auto a16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return a16(q) && a16(kc) && a16(vc) && a16(out);
}

// KV splits (kv_splits.h): each split at least 8 tiles, per_sm blocks resident per SM.
int fa_splits(int64_t groups, int64_t max_tiles, int64_t rows, int D, const DeviceProps& pr, int per_sm) {
  return gpu_common::choose_kv_splits(groups, max_tiles, rows, D, int64_t{std::max(1, pr.sm_count)} * per_sm,
                                      kFaMaxSplits, 8, fa_forced_splits());
}

template <class OpParams>
FaParams fa_params(const OpParams& a) {
  FaParams p;
  p.bt = a.bt;
  p.q = static_cast<const char*>(a.q);
  p.D = a.D;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.o.out = a.o.out;
  p.o.lse = a.o.lse;
  return p;
}
// The fields a paged-cache call (dense or sparse) adds: caches, heads, tiles per page.
template <class PagedParams>
FaParams fa_paged_params(const PagedParams& a, int kind) {
  FaParams p = fa_params(a);
  p.kind = kind;
  p.kc = a.kc;
  p.vc = a.vc;
  p.Hq = a.Hq;
  p.Hkv = a.Hkv;
  p.G = a.G;
  p.tpb = (a.bt.Bs + kFaBK - 1) / kFaBK;
  return p;
}

// Instantiations: {bf16, f16} x {(DP 64, MT 1), (DP 128, MT 1), (DP 128, MT 2)}.
void fa_launch(Stream& st, const FaParams& p, hal::DType dt, unsigned grid, int mt) {
  const auto go = [&](auto dt_tag, auto dp_tag, auto mt_tag) {
    constexpr int DT = decltype(dt_tag)::value, DP = decltype(dp_tag)::value, MT = decltype(mt_tag)::value;
    using L = FaLayout<DP, MT>;
    allow_smem<flash_prefill_kernel<DT, DP, MT>>(L::BYTES + L::SEL_BYTES, st.props().index);
    const int smem = L::BYTES + (p.kind == kFaSparse ? L::SEL_BYTES : 0);
    flash_prefill_kernel<DT, DP, MT><<<grid, FaShape<MT>::THREADS, smem, st.native()>>>(p);
  };
  const auto by_shape = [&](auto dt_tag) {
    using D64 = std::integral_constant<int, 64>;
    using D128 = std::integral_constant<int, 128>;
    using M1 = std::integral_constant<int, 1>;
    using M2 = std::integral_constant<int, 2>;
    if (p.D <= 64)
      go(dt_tag, D64{}, M1{});
    else if (mt == 1)
      go(dt_tag, D128{}, M1{});
    else
      go(dt_tag, D128{}, M2{});
  };
  if (dt == hal::DType::bf16)
    by_shape(std::integral_constant<int, kBF16>{});
  else
    by_shape(std::integral_constant<int, kF16>{});
  MSA_CUDA_CHECK_LAUNCH();
}

// Dense and sparse: grid, splits, partials, launch, merge.
bool fa_run_paged(Stream& st, FaParams& p, hal::DType dt, int64_t max_tiles) {
  const int64_t T = p.bt.T, rows = T * p.Hq;
  p.nslots = (T + int64_t{p.bt.B} * (p.tpc - 1)) / p.tpc;  // >= sum over b of ceil(q_len / tpc)
  const int64_t groups = p.nslots * p.Hkv;
  if (groups <= 0) return true;
  const int mt = fa_mt(p.kind, p.D);
  p.S = fa_splits(groups, max_tiles, rows, p.D, st.props(), mt == 2 ? FaShape<2>::MIN_BLOCKS : 1);
  if (groups * p.S > INT32_MAX) return false;  // gridDim.x; nothing launched yet: other kernels run
  if (p.S > 1) split_buffers(st, p.S, rows, p.D, p.o);
  fa_launch(st, p, dt, static_cast<unsigned>(groups * p.S), mt);
  if (p.S > 1) {
    if (dt == hal::DType::bf16)
      launch_merge<kBF16>(st, p.o, p.S, rows, p.D, p.o.out, p.o.lse);
    else
      launch_merge<kF16>(st, p.o, p.S, rows, p.D, p.o.out, p.o.lse);
  }
  return true;
}

}  // namespace

bool launch_flash_dense(Stream& st, const DenseParams& d, hal::DType dt) {
  if (!fa_ok(st, kFaDense, dt, d.D, d.q, d.kc, d.vc, d.o.out) || d.G < 1 || d.G > kFaRows) return false;
  FaParams p = fa_paged_params(d, kFaDense);
  p.tpc = kFaRows / d.G;
  return fa_run_paged(st, p, dt, int64_t{d.bt.max_blocks} * p.tpb);
}

bool launch_flash_sparse(Stream& st, const SparseParams& s, hal::DType dt) {
  if (!fa_ok(st, kFaSparse, dt, s.D, s.q, s.kc, s.vc, s.o.out) || s.G < 1 || s.G > kFaRows) return false;
  if ((s.Hs != 1 && s.Hs != s.Hkv) || s.k < 1 || s.k > kFaMaxSel) return false;
  FaParams p = fa_paged_params(s, kFaSparse);
  p.tpc = std::max(1, std::min({kFaRows / s.G, kFaMaxQl, kFaMaxSel / s.k}));
  // Default (MSA_CUDA_FLASH_SPARSE unset): only when a block's tokens span at most two query
  // blocks (Qb >= tokens per block). With token-level selection (Qb = 1) a block walks the
  // union of its tokens' selections: a win when consecutive tokens pick mostly the same
  // blocks (real models; msa-bench's select=walk case: 3.4 ms vs the wmma kernel's 13.8 at
  // an 8K chunk over 128K, H200), a loss when they are independent (random selections:
  // 16.2 vs 13.5 ms), so it is opt-in (MSA_CUDA_FLASH_SPARSE=1): the case suites and
  // msa layer draw independent selections.
  static const int mode = env_int("MSA_CUDA_FLASH_SPARSE", -1);
  if (mode < 0 && s.Qb < p.tpc) return false;
  p.bidx = s.bidx;
  p.NQ = s.NQ;
  p.Qb = s.Qb;
  p.k = s.k;
  p.Hs = s.Hs;
  // A block's union holds at most tpc * k distinct blocks (fewer with correlated picks).
  return fa_run_paged(st, p, dt, int64_t{p.tpc} * s.k * p.tpb);
}

bool flash_patch_ok(const Stream& st, hal::DType dt, int D, const void* q, const void* k, const void* v,
                    const void* out) {
  return fa_ok(st, kFaPatch, dt, D, q, k, v, out);
}
int flash_patch_rows() { return kFaRows; }

bool launch_flash_patch(Stream& st, const PatchParams& a, hal::DType dt) {
  if (!flash_patch_ok(st, dt, a.D, a.q, a.k, a.v, a.o.out)) return false;
  FaParams p;
  p.kind = kFaPatch;
  p.q = static_cast<const char*>(a.q);
  p.kc = a.k;
  p.vc = a.v;
  p.D = a.D;
  p.G = 1;
  p.H = a.H;
  p.tpc = kFaRows;
  p.chunks = a.chunks;
  p.count = a.count;
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.o.out = a.o.out;
  p.o.lse = a.o.lse;
  const int mt = fa_mt(kFaPatch, a.D);
  const unsigned grid = static_cast<unsigned>(std::max(1, st.props().sm_count) * (mt == 2 ? 2 : 1));  // persistent
  fa_launch(st, p, dt, grid, mt);
  return true;
}

}  // namespace msa::cuda
