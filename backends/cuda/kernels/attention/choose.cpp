// The forward attention choosers (choose.h). The order of the checks is the priority:
// decode kernels for decode-sized calls, then the prefill kernels of the native tier
// (wgmma before the FlashAttention-2-style kernel), then the shared-core kernels on wmma
// tensor cores (sm_80+, bf16/f16) or on FMA (everything else: the portable tier, f32).
#include "backends/cuda/kernels/attention/choose.h"

#include <algorithm>
#include <climits>

#include "backends/cuda/kernels/kv_splits.h"

namespace msa::MSA_GPU_NS {
namespace attn_geom {

int sparse_tpc(const AttnCall& c) { return std::max(1, kRows / c.G); }

int sparse_row_chunks(const AttnCall& c) {
  const int tpc = sparse_tpc(c);
  return static_cast<int>((std::min<int64_t>(c.Qb, c.T) + tpc - 1) / tpc);
}

// Enough blocks for one resident wave (kDecCtasPerSm per SM), at most `units` tiles and
// kDecMaxSplits, rounded so no split is empty.
int decode_splits(int64_t groups, int64_t units, const DeviceProps& pr) {
  const int64_t cap = int64_t{kDecCtasPerSm} * pr.sm_count;
  if (units <= 1 || groups <= 0 || groups * 2 > cap || groups > kDecCtrPerSlot) return 1;
  int64_t S = std::min<int64_t>({units, cap / groups, kDecMaxSplits});
  const int64_t per = (units + S - 1) / S;
  S = (units + per - 1) / per;
  return static_cast<int>(std::max<int64_t>(1, S));
}

bool decode_sized_sparse(const AttnCall& c) {
  return c.T <= kDecMaxT || (c.Qb == 1 && c.T <= int64_t{kDecMaxMeanQlen} * c.B);
}

int decode_tiles_per_block(int Bs) { return (Bs + kDecBK - 1) / kDecBK; }

int64_t decode_sparse_groups(const AttnCall& c) { return c.NQ * c.Hkv * sparse_row_chunks(c); }

// (sequence, chunk) pairs: sum over b of ceil(q_len[b] / tpc) <= (T + B (tpc - 1)) / tpc.
int64_t decode_dense_groups(const AttnCall& c) {
  const int tpc = sparse_tpc(c);
  return (c.T + int64_t{c.B} * (tpc - 1)) / tpc * c.Hkv;
}

int flash_row_tiles(bool sparse, int D) { return D == 128 && !sparse ? 2 : 1; }

int flash_sparse_tpc(const AttnCall& c) {
  return std::max(1, std::min({kFaRows / c.G, kFaMaxQl, kFaMaxSel / std::max(1, c.k)}));
}

int64_t flash_groups(const AttnCall& c, int tpc) { return (c.T + int64_t{c.B} * (tpc - 1)) / tpc * c.Hkv; }

// KV splits (kv_splits.h): each split at least 8 tiles; 2 blocks resident per SM with two
// row tiles per warp, else 1.
int flash_splits(int64_t groups, int64_t max_tiles, const AttnCall& c, int row_tiles, const DeviceProps& pr,
                 const Tuning& t) {
  const int per_sm = row_tiles == 2 ? 2 : 1;
  return gpu_common::choose_kv_splits(groups, max_tiles, c.T * c.Hq, c.D, int64_t{std::max(1, pr.sm_count)} * per_sm,
                                      kFaMaxSplits, 8, std::clamp(t.flash_splits, 0, kFaMaxSplits));
}

int flash_dense_splits(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  const int tpc = kFaRows / c.G;
  const int64_t tiles = int64_t{c.max_blocks} * ((c.Bs + kFaBK - 1) / kFaBK);
  return flash_splits(flash_groups(c, tpc), tiles, c, flash_row_tiles(false, c.D), pr, t);
}

// A block's union holds at most tpc * k distinct blocks (fewer with correlated picks).
int flash_sparse_splits(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  const int tpc = flash_sparse_tpc(c);
  const int64_t tiles = int64_t{tpc} * c.k * ((c.Bs + kFaBK - 1) / kFaBK);
  return flash_splits(flash_groups(c, tpc), tiles, c, flash_row_tiles(true, c.D), pr, t);
}

int64_t kv_outer_group_tokens(int Hq, int k, int D) {
  const int64_t per_token = int64_t{std::max(1, Hq)} * std::max(1, k) * int64_t{std::max(1, D)} * 2;
  return std::max<int64_t>(1, kKvoPartialBytes / per_token);
}

// One block per SM, each split at least 4 tiles of 128 keys.
int wgmma_splits(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  const int64_t tiles = (int64_t{c.max_blocks} * c.Bs + kWgBK - 1) / kWgBK;
  return gpu_common::choose_kv_splits(flash_groups(c, kWgRows / c.G), tiles, c.T * c.Hq, kWgD, std::max(1, pr.sm_count),
                                      kWgMaxSplits, 4, std::clamp(t.flash_splits, 0, kWgMaxSplits));
}

}  // namespace attn_geom

namespace {
using namespace attn_geom;

bool half_dtype(const AttnCall& c) { return c.dtype == hal::DType::bf16 || c.dtype == hal::DType::f16; }
bool head_dim_16(int D) { return D > 0 && D <= 128 && D % 16 == 0; }
bool shared_or_per_head(const AttnCall& c) { return c.Hs == 1 || c.Hs == c.Hkv; }
bool fits_grid(int64_t blocks) { return blocks <= INT32_MAX; }
// Split-KV needs this stream's arrival counters; streams past the table take other kernels.
bool split_launchable(int S, const AttnCall& c) {
  return S <= 1 || (c.counter_slot >= 0 && c.counter_slot < kDecCtrSlots);
}

// `decode_sized`: the call's token count suits the decode kernels (dense: T <= kDecMaxT;
// sparse: decode_sized_sparse).
bool decode_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t, bool decode_sized) {
  return t.decode >= 1 && t.native() && pr.cc_major >= 8 && half_dtype(c) && head_dim_16(c.D) && c.T > 0 &&
         decode_sized && c.aligned16;
}

// Past 512 tokens (multi-token decode of a serving batch) one CTA per (token, KV head)
// at one per SM runs many waves; the split kernel's two per SM are faster there (1.16 vs
// 1.49 ms at B = 128, q_len 8, 50K, H200).
bool cluster_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  return t.decode >= 2 && pr.cc_major >= 9 && pr.hopper_code && c.D == kClD && c.Bs == kClBs && c.G == kClGroup &&
         sparse_tpc(c) == 1 && c.k >= 1 && c.k <= kClMaxE && c.T <= kDecMaxT &&
         decode_sparse_groups(c) <= INT32_MAX / kClMaxC;  // grid groups x C fits gridDim.x
}

bool flash_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  return t.flash >= 1 && t.native() && pr.cc_major >= 8 && half_dtype(c) && head_dim_16(c.D) && c.aligned16;
}

bool wgmma_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  return t.flash >= 2 && t.native() && pr.cc_major == 9 && pr.cc_minor == 0 && pr.hopper_code && half_dtype(c) &&
         c.D == kWgD && c.G >= 1 && c.G <= kWgRows && c.Bs % kWgBK == 0 && c.aligned16;
}

bool wmma_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  return t.native() && pr.cc_major >= 8 && half_dtype(c);
}

// Sparse prefill on the flash kernel. By default (flash_sparse -1) only when a block's
// tokens span at most two query blocks (Qb >= tokens per block): with token-level
// selection (Qb = 1) a block walks the union of its tokens' selections, a win when
// consecutive tokens pick mostly the same blocks (real models; msa-bench's select=walk
// case: 3.4 ms vs the wmma kernel's 13.8 at an 8K chunk over 128K, H200), a loss when they
// are independent (random selections: 16.2 vs 13.5 ms), so flash_sparse 1 opts in.
bool flash_sparse_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  if (!flash_ok(c, pr, t) || t.flash_sparse == 0 || c.G < 1 || c.G > kFaRows) return false;
  if (!shared_or_per_head(c) || c.k < 1 || c.k > kFaMaxSel) return false;
  const int tpc = flash_sparse_tpc(c);
  if (t.flash_sparse < 0 && c.Qb < tpc) return false;
  return fits_grid(flash_groups(c, tpc) * flash_sparse_splits(c, pr, t));
}

// KV-block-outer prefill: token-level selection (Qb = 1, one query block per token) past
// the decode sizes. kv_outer -1 takes it there, 0 never, 1 wherever it applies (decode
// sizes included: the cross-check's small cases run it).
bool kv_outer_ok(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  if (t.kv_outer == 0 || !flash_ok(c, pr, t) || c.Qb != 1 || c.NQ != c.T || c.T <= 0) return false;
  if (c.Bs < 1 || c.Bs > kKvoMaxBs || c.G < 1 || c.G > kKvoMaxG || c.k < 1 || !shared_or_per_head(c)) return false;
  // slabs (pages x KV heads), the sorted entries of a group and its partial slots fit int
  const int64_t group = std::min<int64_t>(c.T, kv_outer_group_tokens(c.Hq, c.k, c.D));
  return c.pages >= 1 && c.pages * c.Hkv < INT32_MAX && group * c.Hs * c.k < (int64_t{1} << 30) &&
         group * c.Hq * c.k < INT32_MAX;
}

}  // namespace

SparseAttentionKernel choose_sparse_attention(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  if (t.kv_outer == 1 && kv_outer_ok(c, pr, t)) return SparseAttentionKernel::kv_outer;  // decode sizes too
  if (decode_ok(c, pr, t, decode_sized_sparse(c)) && c.k <= kDecMaxK && shared_or_per_head(c)) {
    if (cluster_ok(c, pr, t)) return SparseAttentionKernel::decode_cluster;
    const int S = decode_splits(decode_sparse_groups(c), int64_t{c.k} * decode_tiles_per_block(c.Bs), pr);
    if (split_launchable(S, c)) return SparseAttentionKernel::decode_split;
  }
  if (t.flash_sparse != 1 && kv_outer_ok(c, pr, t)) {
    // Correlated selections (neighbouring tokens choosing mostly the same blocks) favour
    // the flash kernel's union walk, independent ones kv_outer: decided from the
    // selection itself unless a knob fixes it. The walk only where a warp's 16 rows
    // belong to one token (G % 16 == 0): a warp mixing tokens runs the tiles of blocks
    // some of its tokens did not select, and a NaN value there would reach their rows
    // through P = 0 (the non-finite rule).
    Tuning walk = t;
    walk.flash_sparse = 1;
    const bool union_walk = t.kv_outer == -1 && t.flash_sparse == -1 && c.G % 16 == 0 && flash_sparse_ok(c, pr, walk);
    return union_walk ? SparseAttentionKernel::by_union : SparseAttentionKernel::kv_outer;
  }
  if (flash_sparse_ok(c, pr, t)) return SparseAttentionKernel::flash;
  return wmma_ok(c, pr, t) ? SparseAttentionKernel::wmma : SparseAttentionKernel::portable;
}

DenseAttentionKernel choose_dense_attention(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  if (decode_ok(c, pr, t, c.T <= kDecMaxT)) {
    const int S = decode_splits(decode_dense_groups(c), int64_t{c.max_blocks} * decode_tiles_per_block(c.Bs), pr);
    if (split_launchable(S, c)) return DenseAttentionKernel::decode_split;
  }
  if (wgmma_ok(c, pr, t) && fits_grid(flash_groups(c, kWgRows / c.G) * wgmma_splits(c, pr, t)))
    return DenseAttentionKernel::flash_wgmma;
  if (flash_ok(c, pr, t) && c.G >= 1 && c.G <= kFaRows &&
      fits_grid(flash_groups(c, kFaRows / c.G) * flash_dense_splits(c, pr, t)))
    return DenseAttentionKernel::flash;
  return wmma_ok(c, pr, t) ? DenseAttentionKernel::wmma : DenseAttentionKernel::portable;
}

PatchAttentionKernel choose_patch_attention(const AttnCall& c, const DeviceProps& pr, const Tuning& t) {
  if (c.T > 0 && flash_ok(c, pr, t)) return PatchAttentionKernel::flash;
  return wmma_ok(c, pr, t) ? PatchAttentionKernel::wmma : PatchAttentionKernel::portable;
}

SparseAttentionKernel choose_by_union(int64_t sum, int64_t blocks, int tpc, int k, const Tuning& t) {
  const int64_t cap = blocks * std::max(1, tpc) * std::max(1, k);
  return sum * 100 <= int64_t{std::clamp(t.flash_union_pct, 0, 100)} * cap ? SparseAttentionKernel::flash
                                                                           : SparseAttentionKernel::kv_outer;
}

const char* kernel_name(SparseAttentionKernel k) {
  switch (k) {
    case SparseAttentionKernel::by_union:
      return "by_union";
    case SparseAttentionKernel::decode_cluster:
      return "decode_cluster";
    case SparseAttentionKernel::decode_split:
      return "decode_split";
    case SparseAttentionKernel::kv_outer:
      return "kv_outer";
    case SparseAttentionKernel::flash:
      return "flash";
    case SparseAttentionKernel::wmma:
      return "wmma";
    case SparseAttentionKernel::portable:
      return "portable";
  }
  return "?";
}
const char* kernel_name(DenseAttentionKernel k) {
  switch (k) {
    case DenseAttentionKernel::decode_split:
      return "decode_split";
    case DenseAttentionKernel::flash_wgmma:
      return "flash_wgmma";
    case DenseAttentionKernel::flash:
      return "flash";
    case DenseAttentionKernel::wmma:
      return "wmma";
    case DenseAttentionKernel::portable:
      return "portable";
  }
  return "?";
}
const char* kernel_name(PatchAttentionKernel k) {
  switch (k) {
    case PatchAttentionKernel::flash:
      return "flash";
    case PatchAttentionKernel::wmma:
      return "wmma";
    case PatchAttentionKernel::portable:
      return "portable";
  }
  return "?";
}

}  // namespace msa::MSA_GPU_NS
