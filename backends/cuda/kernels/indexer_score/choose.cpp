// indexer_score's chooser (choose.h). The order of the checks is the priority: decode on
// mma.sync, then prefill on wgmma (sm_90a), then prefill on mma.sync, else portable.
#include "backends/cuda/kernels/indexer_score/choose.h"

#include <algorithm>
#include <climits>

#include "backends/cuda/kernels/common/aligned.h"
#include "backends/cuda/kernels/indexer_score/prefill_layout.h"

namespace msa::cuda {
namespace {

bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// Tokens per sequence, rounded up.
int64_t mean_qlen(const IndexerShape& s) { return s.B > 0 ? (s.T + s.B - 1) / s.B : s.T; }

// Qb = 1 and at most 64 queries (or, with token groups, at most kDecodeMaxQlen per
// sequence on average); keys bf16 with bf16 qi, fp8 with bf16/f16 qi, or NVFP4 with
// bf16/f16 qi at Di = 128; Hi <= 8; Di 64 or 128; Bs a multiple of 16.
bool decode_mma_fits(const IndexerShape& s, const DeviceProps& pr, const Tuning& t) {
  using hal::DType;
  const bool qi16 = s.qi == DType::bf16 || s.qi == DType::f16;
  const bool keys_ok = (s.keys == DType::fp8_e4m3 && qi16) || (s.keys == DType::bf16 && s.qi == DType::bf16) ||
                       (s.keys == DType::fp4_e2m1x2 && qi16 && s.Di == 128);
  // NVFP4 scales are read two bytes at a time.
  const bool scales_ok = s.keys != DType::fp4_e2m1x2 || s.scale_2;
  return t.indexer >= 1 && t.native() && pr.cc_major >= 8 && keys_ok && scales_ok && s.Qb == 1 &&
         (s.T <= 64 || (t.indexer_groups != 0 && mean_qlen(s) <= kDecodeMaxQlen)) && s.Hi <= 8 &&
         (s.Di == 64 || s.Di == 128) && s.Bs % 16 == 0;
}

// Prefill-like: many queries per sequence (decode-like calls go to the other kernels).
bool prefill_like(const IndexerShape& s) { return s.NQ > 0 && s.MB > 0 && s.T > 0 && s.B > 0 && s.T >= 8 * s.B; }

// sm_90a code in the build, qi and keys bf16 without scales, Di 64 or 128 (whole TMA
// boxes), Bs a multiple of 128, Hi a power of two in [4, 64].
bool prefill_wgmma_fits(const IndexerShape& s, const DeviceProps& pr, const Tuning& t) {
  using namespace indexer_wg;
  if (t.indexer < 2 || !t.native() || pr.cc_major != 9 || !pr.hopper_code) return false;
  if (s.qi != hal::DType::bf16 || s.keys != hal::DType::bf16 || s.ki_scale) return false;
  if (!prefill_like(s) || (s.Di != 64 && s.Di != 128) || s.Bs % kChunk != 0) return false;
  if (s.Hi < 4 || s.Hi > 64 || !is_pow2(s.Hi)) return false;
  if (s.T * s.Hi > INT32_MAX || s.P * s.Bs > INT32_MAX) return false;  // TMA row coordinates are int32
  if (!s.qi_16 || !s.keys_16) return false;
  const int TM = kRows / static_cast<int>(s.Hi);
  if (s.Qb > TM && s.Qb % TM != 0) return false;  // sub-tiles must tile the query block
  if (!prefill_grid(s.T, s.B, s.NQ, s.MB, s.Qb, TM, pr.sm_count, kMaxSpan).fits()) return false;
  return static_cast<size_t>(smem_bytes(static_cast<int>(s.Di))) + 4096 <= pr.smem_optin;
}

// qi bf16 or f16, keys bf16 (with bf16 qi) or fp8; Di a multiple of 16 up to 128; Bs 64 or
// a multiple of 128; Hi <= 256.
bool prefill_tc_fits(const IndexerShape& s, const DeviceProps& pr, const Tuning& t) {
  using namespace indexer_tc;
  using hal::DType;
  if (t.indexer < 1 || !t.native() || pr.cc_major < 8) return false;
  const bool fp8 = s.keys == DType::fp8_e4m3;
  if (s.qi != DType::bf16 && s.qi != DType::f16) return false;
  if (s.keys != DType::bf16 && !fp8) return false;
  if (s.qi == DType::f16 && !fp8) return false;  // f16 x bf16: no exact common MMA type
  if (!prefill_like(s)) return false;
  if (s.Di <= 0 || s.Di > 128 || s.Di % 16 != 0) return false;
  if (s.Bs != 64 && s.Bs % kChunk != 0) return false;
  if (s.Hi < 1 || s.Hi > kRows) return false;
  if (!s.qi_16 || !s.keys_16 || (s.ki_scale && !s.scale_4)) return false;
  const int TM = tile_tokens(static_cast<int>(s.Hi));
  if (!prefill_grid(s.T, s.B, s.NQ, s.MB, s.Qb, TM, pr.sm_count, kMaxSpan).fits()) return false;
  return static_cast<size_t>(smem_bytes(static_cast<int>(s.Di))) + 4096 <= pr.smem_optin;
}

}  // namespace

const char* kernel_name(IndexerKernel k) {
  switch (k) {
    case IndexerKernel::portable:
      return "portable";
    case IndexerKernel::decode_mma:
      return "decode_mma";
    case IndexerKernel::prefill_wgmma:
      return "prefill_wgmma";
    case IndexerKernel::prefill_tc:
      return "prefill_tc";
  }
  return "?";
}

const char* kernel_name(IndexerTopkKernel k) {
  return k == IndexerTopkKernel::fused_decode ? "fused_decode" : "separate";
}

IndexerShape indexer_shape(const ops::IndexerScoreArgs& a) {
  IndexerShape s;
  s.qi = a.qi.dtype;
  s.keys = a.ki_cache.dtype;
  const bool nvfp4 = s.keys == hal::DType::fp4_e2m1x2;
  s.ki_scale = a.ki_scale.present() && !nvfp4;
  s.lse = a.pool == ops::Pool::lse;
  s.T = a.qi.dim(0);
  s.Hi = a.qi.dim(1);
  s.Di = a.qi.dim(2);
  s.B = a.kv_len.dim(0);
  s.MB = a.block_table.dim(1);
  s.P = a.ki_cache.dim(0);
  s.Bs = a.ki_cache.dim(1);
  s.NQ = a.NQ;
  s.Qb = a.Qb;
  s.qi_16 = aligned_to(a.qi, 16);
  s.keys_16 = aligned_to(a.ki_cache, 16);
  s.scale_4 = !a.ki_scale.present() || aligned_to(a.ki_scale, 4);
  s.scale_2 = !a.ki_scale.present() || aligned_to(a.ki_scale, 2);
  return s;
}

IndexerKernel choose_indexer_score(const IndexerShape& s, const DeviceProps& pr, const Tuning& t) {
  if (decode_mma_fits(s, pr, t)) return IndexerKernel::decode_mma;
  if (prefill_wgmma_fits(s, pr, t)) return IndexerKernel::prefill_wgmma;
  if (prefill_tc_fits(s, pr, t)) return IndexerKernel::prefill_tc;
  return IndexerKernel::portable;
}

DecodeGroups decode_groups(const IndexerShape& s, const Tuning& t) {
  DecodeGroups d;
  d.items = d.full = s.NQ;  // one token per group: a grid item per query block
  const int64_t mean = mean_qlen(s);
  if (t.indexer_groups == 0 || mean <= 1 || s.Hi < 1 || s.Hi > 8) return d;
  const int64_t cols = std::min<int64_t>(mean, kDecodeMaxQlen) * s.Hi;
  d.ntiles = cols <= 8 ? 1 : cols <= 16 ? 2 : 4;
  d.tokens = static_cast<int>(std::min<int64_t>(kDecodeMaxQlen, 8 * d.ntiles / s.Hi));
  // A sequence of q tokens makes ceil(q / tokens) groups: in all at most
  // (T + B (tokens - 1)) / tokens, and never more than T.
  d.items = std::min<int64_t>(s.T, (s.T + s.B * (d.tokens - 1)) / d.tokens);
  d.full = (s.T + d.tokens - 1) / d.tokens;
  return d;
}

IndexerTopkKernel choose_indexer_topk(const IndexerShape& s, int64_t Hs, const DeviceProps& pr, const Tuning& t) {
  // At most one select block per SM: even a dispatcher that did not follow block order
  // would find room for the indexer blocks the select blocks wait on.
  const bool fits = t.fused_topk != 0 && s.MB > 0 && s.MB <= kFusedTopkMaxBlocks && s.NQ > 0 &&
                    s.NQ <= kFusedTopkMaxNQ && decode_mma_fits(s, pr, t) && s.NQ * Hs <= pr.sm_count &&
                    decode_groups(s, t).tokens == 1;
  return fits ? IndexerTopkKernel::fused_decode : IndexerTopkKernel::separate;
}

}  // namespace msa::cuda
