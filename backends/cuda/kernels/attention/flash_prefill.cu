// Prefill attention in the FlashAttention-2 style (sm_80+, bf16/f16, head dim a multiple
// of 16 up to 128) for dense_attention, sparse_block_attention and patch_attention_3d on
// the native tier, where the ops' choosers (choose.h) take it: decode-sized calls go to
// decode_split.cu first, f32, the portable tier and the other shapes to the wmma/FMA
// kernels.
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
// This file: the launches (their shapes and split counts from choose.h); the kernel is in
// flash_prefill_kernel.cuh.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/kernels/attention/flash_prefill_kernel.cuh"
#include "backends/cuda/kernels/attention/launchers.cuh"

namespace msa::cuda {
namespace {

// ---- host side ---------------------------------------------------------------------------
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

// Dense and sparse: grid, partials, launch, merge (S: attn_geom's flash split count).
void fa_run_paged(Stream& st, FaParams& p, hal::DType dt, int S) {
  static_assert(FaShape<2>::MIN_BLOCKS == 2, "attn_geom::flash_splits counts 2 resident blocks per SM at MT 2");
  const int64_t T = p.bt.T, rows = T * p.Hq;
  p.nslots = (T + int64_t{p.bt.B} * (p.tpc - 1)) / p.tpc;  // >= sum over b of ceil(q_len / tpc)
  const int64_t groups = p.nslots * p.Hkv;
  if (groups <= 0) return;
  const int mt = attn_geom::flash_row_tiles(p.kind == kFaSparse, p.D);
  p.S = S;
  if (p.S > 1) split_buffers(st, p.S, rows, p.D, p.o);
  fa_launch(st, p, dt, static_cast<unsigned>(groups * p.S), mt);
  if (p.S > 1) {
    if (dt == hal::DType::bf16)
      launch_merge<kBF16>(st, p.o, p.S, rows, p.D, p.o.out, p.o.lse);
    else
      launch_merge<kF16>(st, p.o, p.S, rows, p.D, p.o.out, p.o.lse);
  }
}

}  // namespace

void launch_flash_dense(Stream& st, const DenseParams& d, hal::DType dt) {
  FaParams p = fa_paged_params(d, kFaDense);
  p.tpc = kFaRows / d.G;
  fa_run_paged(st, p, dt, attn_geom::flash_dense_splits(attn_call(st, d, dt), st.props(), st.tuning()));
}

void launch_flash_sparse(Stream& st, const SparseParams& s, hal::DType dt) {
  const AttnCall c = attn_call(st, s, dt);
  FaParams p = fa_paged_params(s, kFaSparse);
  p.tpc = attn_geom::flash_sparse_tpc(c);
  p.bidx = s.bidx;
  p.NQ = s.NQ;
  p.Qb = s.Qb;
  p.k = s.k;
  p.Hs = s.Hs;
  fa_run_paged(st, p, dt, attn_geom::flash_sparse_splits(c, st.props(), st.tuning()));
}

void launch_flash_patch(Stream& st, const PatchParams& a, hal::DType dt) {
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
  const int mt = attn_geom::flash_row_tiles(false, a.D);
  const unsigned grid = static_cast<unsigned>(std::max(1, st.props().sm_count) * (mt == 2 ? 2 : 1));  // persistent
  fa_launch(st, p, dt, grid, mt);
}

}  // namespace msa::cuda
