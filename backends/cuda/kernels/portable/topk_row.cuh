// The selection rule of one block_topk row (spec: valid blocks, forced sink and local
// blocks, the rows whose answer needs no select, the keys scores select by), shared by
// block_topk.cu and the decode indexer's fused select, so both follow one reading of the
// contract.
#pragma once
#include "backends/cuda/kernels/portable/seq.cuh"

namespace msa::MSA_GPU_NS {

// A row's valid blocks and forced blocks (sinks, local window).
struct RowInfo {
  int nvalid = 0, sink_end = 0, loc_lo = 0, loc_hi = -1;
  bool has_local = false;
  __device__ bool forced(int c) const { return c < sink_end || (has_local && c >= loc_lo && c <= loc_hi); }
};

// Fills `ri` for query block `q` over a row of `n` scores and returns -1 when the row
// needs a selection; otherwise the answer is fixed, blocks 0 .. r-1 then -1, and r is
// returned (0 for a query block without queries; nvalid when nvalid <= k).
__device__ inline int row_rule(const QBlock& q, int Bs, int n, int k, int n_sink, int n_local, RowInfo& ri) {
  if (q.ntok <= 0) return 0;
  const int p1 = q.p0 + q.ntok - 1;
  ri.nvalid = min(p1 / Bs + 1, n);
  if (ri.nvalid <= k) return ri.nvalid;
  ri.sink_end = min(n_sink, ri.nvalid);
  ri.has_local = n_local > 0;
  ri.loc_lo = max(0, q.p0 / Bs - n_local + 1);
  ri.loc_hi = min(p1 / Bs, ri.nvalid - 1);
  return -1;
}

// A non-forced block's select key for score s: its ordered key, 0 (never selected) for
// -inf and NaN.
__device__ __forceinline__ uint32_t candidate_key(float s) {
  const uint32_t k = ordered_key(s);
  return k <= 0x007fffffu ? 0u : k;
}

// The select key of valid block c: forced blocks get the largest key, which no score maps
// to, so they are always taken; the others candidate_key.
__device__ __forceinline__ uint32_t select_key(const RowInfo& ri, int c, float s) {
  return ri.forced(c) ? 0xffffffffu : candidate_key(s);
}

}  // namespace msa::MSA_GPU_NS
