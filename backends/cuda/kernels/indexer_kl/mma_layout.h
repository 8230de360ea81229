// The geometry of indexer_kl's tensor-core kernels (mma.cu): the shared-memory layouts of
// the rows and dki kernels, in plain C++ so that the chooser (choose.cpp) decides with the
// numbers the launcher uses.
#pragma once
#include "backends/cuda/kernels/attention_backward/mma_layout.h"

namespace msa::cuda::klmma {

using bwd::chunk_keys;
using bwd::kEntChunk;
using bwd::kRowBytes;
using bwd::kStages;

inline constexpr int kRowWarps = 4;
inline constexpr int kRowThreads = 32 * kRowWarps;
inline constexpr int kRowKeys = 16;   // keys per tile
inline constexpr int kRowStages = 3;  // tiles per warp in shared memory (two in flight)

template <int DP>
struct KlRowLayout {
  static constexpr int TILE = kRowKeys * kRowBytes<DP>;  // K or ki rows of one tile
  static constexpr int STAGE = 2 * TILE;                 // K rows, then ki rows
  static constexpr int WARP = kRowStages * STAGE;
  static constexpr int BYTES = kRowWarps * WARP;
};

template <int DP, int KW>
struct KlDkiLayout {
  static constexpr int NW = KW / 16, THREADS = 32 * NW;
  static constexpr int ROWB = kRowBytes<DP>;
  static constexpr int K_OFF = 0, KI_OFF = KW * ROWB;  // the chunk's K rows, ki rows
  // A stage: q rows [16][ROWB], qi rows [16][ROWB] (first rows of tokens), then per row
  // lse, limit, lse_u, lone target, dkl.
  static constexpr int Q_AT = 0, I_AT = 16 * ROWB, LSE_AT = 32 * ROWB, LIM_AT = LSE_AT + 64, LU_AT = LIM_AT + 64,
                       PL_AT = LU_AT + 64, W_AT = PL_AT + 64;
  static constexpr int STAGE = W_AT + 64;
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

// Dynamic shared memory of the rows and dki kernels at head dims up to D and page size Bs.
inline int kl_smem_bytes(int D, int Bs) { return bwd::tiles_smem_bytes<KlDkiLayout, KlRowLayout>(D, Bs); }

}  // namespace msa::cuda::klmma
