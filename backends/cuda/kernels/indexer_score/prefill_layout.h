// The geometry of the prefill indexer kernels (prefill_tc.cu on mma.sync, prefill_wgmma.cu on
// wgmma): their shared-memory layouts and the grid of a call, in plain C++ so that the
// chooser (choose.cpp) decides with the same numbers the launchers use.
#pragma once
#include <algorithm>
#include <cstdint>

namespace msa::cuda {

// The grid of a prefill indexer call: `tiles` W-aligned query windows (W = max(Qb, TM))
// times `nsplit` ranges of each tile's KV blocks (~8 CTAs per SM, <= max_span blocks each).
struct PrefillGrid {
  int64_t tiles = 0, nsplit = 0;
  bool fits() const { return tiles <= INT32_MAX && nsplit <= 65535; }
};
inline PrefillGrid prefill_grid(int64_t T, int64_t B, int64_t NQ, int64_t MB, int Qb, int TM, int sm_count,
                                int max_span) {
  const int64_t W = std::max(Qb, TM);
  PrefillGrid g;
  // Exactly NQ when a query block fills a tile, else at most NQ and at most ceil(T / W) + 2
  // per sequence (a sequence's first and last window may be partial).
  g.tiles = Qb >= TM ? NQ : std::min<int64_t>(NQ, (T + W - 1) / W + 2 * B);
  const int64_t want = int64_t{8} * sm_count;
  g.nsplit = std::max<int64_t>((want + g.tiles - 1) / std::max<int64_t>(g.tiles, 1), (MB + max_span - 1) / max_span);
  return g;
}

namespace indexer_tc {

inline constexpr int kThreads = 256;  // 8 warps: 4 along rows x 2 along keys
inline constexpr int kRows = 256;     // GEMM rows per CTA
inline constexpr int kChunk = 128;    // keys per pipeline step
inline constexpr int kMaxSpan = 256;  // KV blocks per CTA at most (their page ids live in shared memory)

template <int DP>
struct Layout {
  static constexpr int ROW = DP + 8;                            // 16-bit elements per row
  static constexpr int Q_OFF = 0;                               // [kRows][ROW]
  static constexpr int K_OFF = Q_OFF + kRows * ROW * 2;         // [2][kChunk][ROW]
  static constexpr int STG_OFF = K_OFF + 2 * kChunk * ROW * 2;  // [kChunk][DP] raw fp8 keys
  static constexpr int KS_OFF = STG_OFF + kChunk * DP;          // [2][kChunk] ki_scale
  static constexpr int PM_OFF = KS_OFF + 2 * kChunk * 4;        // [2][kRows] partial max
  static constexpr int PE_OFF = PM_OFF + 2 * kRows * 4;         // [2][kRows] partial sum
  static constexpr int LIM_OFF = PE_OFF + 2 * kRows * 4;        // [kRows] last visible key
  static constexpr int PAGE_OFF = LIM_OFF + kRows * 4;          // [kMaxSpan] page ids
  static constexpr int WMAX_OFF = PAGE_OFF + kMaxSpan * 4;      // [2][warps]
  static constexpr int BYTES = WMAX_OFF + 2 * (kThreads / 32) * 4;
};
inline int smem_bytes(int Di) { return Di <= 64 ? Layout<64>::BYTES : Layout<128>::BYTES; }
// Token slots per row tile: the largest power of two with TM * Hi <= kRows.
inline int tile_tokens(int Hi) {
  int tm = 1;
  while (tm * 2 * Hi <= kRows) tm *= 2;
  return tm;
}

}  // namespace indexer_tc

namespace indexer_wg {

inline constexpr int kConsumers = 256;             // two consumer warpgroups
inline constexpr int kThreads = kConsumers + 128;  // + the producer warpgroup (one thread works)
inline constexpr int kMT = 2;                      // 64-row m-tiles per consumer warpgroup
inline constexpr int kRows = 128 * kMT;            // GEMM rows per CTA
inline constexpr int kChunk = 128;                 // keys per step
inline constexpr int kStages = 4;                  // key ring depth
inline constexpr int kMaxSpan = 256;               // KV blocks per CTA at most (page ids in shared memory)

template <int NP>  // 64-column (128-byte) panels of Di
struct Layout {
  static constexpr int ROWS = kRows;
  static constexpr int PANEL_Q = ROWS * 128;
  static constexpr int PANEL_K = kChunk * 128;
  static constexpr int Q_OFF = 0;                     // [NP][ROWS][64] swizzled
  static constexpr int K_OFF = Q_OFF + NP * PANEL_Q;  // [kStages][NP][kChunk][64]
  static constexpr int STAGE = NP * PANEL_K;
  static constexpr int BAR_OFF = K_OFF + kStages * STAGE;           // full[S], empty[S], qfull, qempty
  static constexpr int PAGE_OFF = BAR_OFF + (2 * kStages + 2) * 8;  // [kMaxSpan] page ids
  static constexpr int SC_OFF = PAGE_OFF + kMaxSpan * 4;            // [2][ROWS] row scores
  static constexpr int WMAX_OFF = SC_OFF + 2 * ROWS * 4;            // [2][8] per-warp maxima
  static constexpr int BYTES = WMAX_OFF + 2 * 8 * 4 + 1024;         // + slack to align the base
};
inline int smem_bytes(int Di) { return Di <= 64 ? Layout<1>::BYTES : Layout<2>::BYTES; }

}  // namespace indexer_wg

}  // namespace msa::cuda
