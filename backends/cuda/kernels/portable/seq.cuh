// Device-side view of a varlen, paged batch (cu_q, kv_len, block_table): validates the
// index data as it reads it (raising the device error flag, see error_flags.h) and
// locates query blocks and tokens. Every kernel treats these arrays as untrusted.
#pragma once
#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/error_flags.h"

namespace msa::MSA_GPU_NS {

struct Batch {
  const int32_t* cu_q = nullptr;         // [B+1]
  const int32_t* kv_len = nullptr;       // [B]
  const int32_t* block_table = nullptr;  // [B][max_blocks] (may be null)
  int B = 0;
  int T = 0;            // packed query tokens
  int max_blocks = 0;   // columns of block_table (or of block_score)
  int Bs = 1;           // tokens per KV block
  int64_t P = 0;        // pages (for page id checks)
  int* flag = nullptr;  // device error flag
  int op = 0;           // hal::OpId of the caller
};

// One sequence's lengths, validated.
struct Seq {
  int q0 = 0;    // first packed token
  int qlen = 0;  // tokens in this call
  int kv = 0;    // cached tokens including this call's
  bool ok = false;
};

// Reads sequence b; on invalid data raises the flag and returns ok = false (qlen = 0).
__device__ __forceinline__ Seq load_seq(const Batch& bt, int b, bool report = true) {
  Seq s;
  const int c0 = bt.cu_q[b], c1 = bt.cu_q[b + 1], kv = bt.kv_len[b];
  const bool t_known = bt.T >= 0;  // block_topk does not know T
  const bool cu_ok =
      (b > 0 || c0 == 0) && c0 >= 0 && c1 >= c0 && (!t_known || c1 <= bt.T) && (!t_known || b + 1 < bt.B || c1 == bt.T);
  const bool kv_ok = kv >= c1 - c0 && static_cast<int64_t>(kv) <= static_cast<int64_t>(bt.max_blocks) * bt.Bs;
  if (!cu_ok || !kv_ok) {
    if (report) raise_flag(bt.flag, cu_ok ? kErrKvLen : kErrCuQ, bt.op);
    return s;
  }
  s.q0 = c0;
  s.qlen = c1 - c0;
  s.kv = kv;
  s.ok = true;
  return s;
}

// Number of query blocks of a sequence (0 when it has no queries).
__device__ __forceinline__ int seq_qblocks(const Seq& s, int Qb) {
  if (s.qlen <= 0) return 0;
  return (s.kv - 1) / Qb - (s.kv - s.qlen) / Qb + 1;
}

// A query block: its sequence, its packed tokens [t0, t0 + ntok) and their first position.
struct QBlock {
  int b = -1;
  int t0 = 0, ntok = 0;
  int p0 = 0;  // position of token t0
  int kv = 0;
};

// Locates global query block `qb` by a scan over the sequences (B is small; all threads
// of a block read the same addresses). Returns ntok = 0 when not found or invalid.
// Flags kErrNQ when the blocks of the whole batch do not add up to NQ (checked by the
// caller that passes check_nq, e.g. block 0 only).
__device__ __forceinline__ QBlock locate_qblock(const Batch& bt, int Qb, int64_t qb, int64_t NQ, bool check_nq) {
  QBlock r;
  int64_t acc = 0;
  for (int b = 0; b < bt.B; ++b) {
    const Seq s = load_seq(bt, b, check_nq);
    const int nb = s.ok ? seq_qblocks(s, Qb) : 0;
    if (r.b < 0 && qb < acc + nb) {
      const int first = s.kv - s.qlen;  // position of the first token
      const int blk = first / Qb + static_cast<int>(qb - acc);
      const int pstart = max(first, blk * Qb);
      const int pend = min(s.kv - 1, blk * Qb + Qb - 1);
      r.b = b;
      r.t0 = s.q0 + (pstart - first);
      r.ntok = pend - pstart + 1;
      r.p0 = pstart;
      r.kv = s.kv;
      if (!check_nq) return r;
    }
    acc += nb;
  }
  if (check_nq && acc != NQ) raise_flag(bt.flag, kErrNQ, bt.op);
  return r;
}

// Copies cu_q and kv_len into shared memory (when B <= cap) so the per-block scans of
// locate_qblock / load_seq read shared memory instead of a chain of global loads.
// Returns the batch to use (pointing at the copies, or `bt` itself). Contains a barrier:
// call with every thread of the block.
__device__ __forceinline__ Batch cache_batch(const Batch& bt, int32_t* s_cu, int32_t* s_kv, int cap) {
  if (bt.B > cap) return bt;
  for (int i = threadIdx.x; i <= bt.B; i += blockDim.x) {
    s_cu[i] = bt.cu_q[i];
    if (i < bt.B) s_kv[i] = bt.kv_len[i];
  }
  __syncthreads();
  Batch c = bt;
  c.cu_q = s_cu;
  c.kv_len = s_kv;
  return c;
}
inline constexpr int kBatchCache = 256;

// The sequence holding packed token t (binary search over cu_q); -1 when none.
__device__ __forceinline__ int seq_of_token(const Batch& bt, int t) {
  int lo = 0, hi = bt.B - 1, found = -1;
  while (lo <= hi) {
    const int mid = (lo + hi) >> 1;
    if (bt.cu_q[mid] <= t) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  // Skip empty sequences that share the start: take the one whose range holds t.
  while (found >= 0 && found < bt.B && bt.cu_q[found + 1] <= t) ++found;
  return (found >= 0 && found < bt.B) ? found : -1;
}

// A page id read from the block table, checked against the cache (-1 and the error flag
// when out of range).
__device__ __forceinline__ int checked_page(const Batch& bt, int p) {
  if (p < 0 || p >= bt.P) {
    raise_flag(bt.flag, kErrPageId, bt.op);
    return -1;
  }
  return p;
}

// Page of logical block c of sequence b, or -1 (flag raised) when out of range.
__device__ __forceinline__ int64_t page_of(const Batch& bt, int b, int c) {
  return checked_page(bt, bt.block_table[static_cast<int64_t>(b) * bt.max_blocks + c]);
}

}  // namespace msa::MSA_GPU_NS
