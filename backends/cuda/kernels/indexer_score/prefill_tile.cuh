// CUDA-only: the row tiles of the prefill indexer kernels (prefill_tc.cu, prefill_wgmma.cu):
// a tile is a W-aligned window of query positions of one sequence, W = max(Qb, TM), so
// every query block lies inside one tile.
#pragma once
#include "backends/cuda/kernels/portable/seq.cuh"

namespace msa::cuda {

// Tile `tile` of the batch: a W-aligned window of positions [p0, p1] of sequence b, its
// first packed token t0 and the global index qb0 of its first query block.
struct TileLoc {
  int b = -1, t0 = 0, p0 = 0, p1 = -1, kv = 0;
  int64_t qb0 = 0;
};

// Scans the sequences (like locate_qblock); `check` also verifies that the query blocks
// add up to NQ and reports invalid lengths.
inline __device__ TileLoc locate_tile(const Batch& bt, int W, int Qb, int64_t tile, int64_t NQ, bool check) {
  TileLoc r;
  int64_t acc_t = 0, acc_q = 0;
  for (int b = 0; b < bt.B; ++b) {
    const Seq s = load_seq(bt, b, check);
    if (!s.ok || s.qlen <= 0) continue;
    const int nt = seq_qblocks(s, W);
    const int first = s.kv - s.qlen;
    if (r.b < 0 && tile < acc_t + nt) {
      const int w = first / W + static_cast<int>(tile - acc_t);
      r.b = b;
      r.p0 = max(first, w * W);
      r.p1 = min(s.kv - 1, w * W + W - 1);
      r.t0 = s.q0 + (r.p0 - first);
      r.kv = s.kv;
      r.qb0 = acc_q + (r.p0 / Qb - first / Qb);
      if (!check) return r;
    }
    acc_t += nt;
    acc_q += seq_qblocks(s, Qb);
  }
  if (check && acc_q != NQ) raise_flag(bt.flag, kErrNQ, bt.op);
  return r;
}

}  // namespace msa::cuda
