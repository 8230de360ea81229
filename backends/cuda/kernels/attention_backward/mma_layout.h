// The geometry of the tensor-core training kernels (attention_backward/mma.cu, indexer_kl/
// mma.cu): shared-memory rows and layouts of the attention backward's kernels, the work
// item sizes, in plain C++ so that the choosers (choose.cpp) decide with the numbers the
// launchers use.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace msa::cuda::bwd {

// Shared-memory rows of ROWB = 2 DP + 16 bytes: 8 consecutive rows at one 16-byte column
// hit 8 distinct 4-bank groups, so ldmatrix reads them without conflicts.
template <int DP>
inline constexpr int kRowBytes = DP * 2 + 16;

inline constexpr int kEntChunk = 1024;  // entries an item may span: its tokens < kEntChunk
inline constexpr int kStages = 6;       // query tiles in shared memory (five in flight)

template <int DP, int KW>
struct DkdvLayout {
  static constexpr int NW = KW / 16, THREADS = 32 * NW;
  static constexpr int ROWB = kRowBytes<DP>;
  static constexpr int K_OFF = 0, V_OFF = KW * ROWB;  // the chunk's K, V rows
  // A stage: q rows [16][ROWB], dout rows [16][ROWB], lse[16], delta[16], lim[16].
  static constexpr int Q_AT = 0, O_AT = 16 * ROWB, LSE_AT = 32 * ROWB, DELTA_AT = LSE_AT + 64, LIM_AT = DELTA_AT + 64;
  static constexpr int STAGE = LIM_AT + 64;
  static constexpr int ST_OFF = 2 * KW * ROWB;
  static constexpr int ENT_OFF = ST_OFF + kStages * STAGE;
  static constexpr int BYTES = ENT_OFF + (kEntChunk + 1) * 16;  // int4 {t0, p0, c, first token}
  static constexpr int CPR = DP / 8;                            // 16-byte chunks per row
  // Copy mapping of a tile: thread -> row tid / CPR (+ 16 / RPT-strided rows), chunk tid % CPR.
  static constexpr int ROW_SLOTS = THREADS / CPR;
  static constexpr int RPT = ROW_SLOTS >= 16 ? 1 : 16 / ROW_SLOTS;
  static_assert(STAGE % 16 == 0 && ST_OFF % 16 == 0 && ENT_OFF % 16 == 0, "16-byte aligned areas");
  static_assert(RPT * ROW_SLOTS >= 16 && (ROW_SLOTS >= 16 || 16 % ROW_SLOTS == 0), "copy mapping");
};

inline constexpr int kDqWarps = 4;
inline constexpr int kDqThreads = 32 * kDqWarps;
inline constexpr int kDqKeys = 16;   // keys per tile
inline constexpr int kDqStages = 3;  // tiles per warp in shared memory (two in flight)

template <int DP>
struct DqLayout {
  static constexpr int ROWB = kRowBytes<DP>;
  static constexpr int TILE = kDqKeys * ROWB;  // K or V rows of one tile
  static constexpr int STAGE = 2 * TILE;
  static constexpr int WARP = kDqStages * STAGE;
  static constexpr int BYTES = kDqWarps * WARP;
};

// Keys per KV-block-outer block: 64 (4 warps, 2 blocks per SM) for Bs <= 64, else 128
// (8 warps).
inline int chunk_keys(int Bs) { return Bs <= 64 ? 64 : 128; }

// Tokens per item: `forced` when > 0, else from the shape alone, whatever the device:
// about kTargetItems items over `tokens` (the lists' tokens; enough to spread a heavy
// list, the sink block every query selects, over many blocks), at least kMinItemRows
// rows of G heads, under kEntChunk.
inline constexpr int64_t kTargetItems = 4096;
inline constexpr int64_t kMinItemRows = 1024;
inline int64_t tokens_per_item(int forced, int64_t G, int64_t tokens) {
  if (forced > 0) return forced;
  return std::min<int64_t>(kEntChunk - 1,
                           std::max<int64_t>((kMinItemRows + G - 1) / G, (tokens + kTargetItems - 1) / kTargetItems));
}
// A Tuning hook's value (bwd_item_tokens, kl_item_tokens) as a forced item size (1 ..
// kEntChunk - 1; 0: from the shape): for testing the ordered hand-off between items on
// small cases.
inline int forced_item_tokens(int hook) { return std::clamp(hook, 0, kEntChunk - 1); }

// Dynamic shared memory of a training op's two tensor-core kernels at head dim D (padded
// to 64 or 128) and page size Bs: the larger of the KV-block-outer kernel's layout
// Outer<DP, KW> (KW = chunk_keys(Bs)) and the query-outer kernel's Inner<DP>.
template <template <int, int> class Outer, template <int> class Inner>
int tiles_smem_bytes(int D, int Bs) {
  const auto at = [Bs](auto dp) {
    constexpr int DP = decltype(dp)::value;
    const int outer = chunk_keys(Bs) == 64 ? Outer<DP, 64>::BYTES : Outer<DP, 128>::BYTES;
    return std::max(outer, Inner<DP>::BYTES);
  };
  return D <= 64 ? at(std::integral_constant<int, 64>{}) : at(std::integral_constant<int, 128>{});
}
inline int backward_smem_bytes(int D, int Bs) { return tiles_smem_bytes<DkdvLayout, DqLayout>(D, Bs); }

}  // namespace msa::cuda::bwd
