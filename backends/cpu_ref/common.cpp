#include "backends/cpu_ref/common.h"

#include <algorithm>
#include <string>

namespace msa::cpu_ref {

Batch make_batch(const char* op, const hal::Tensor& cu_q, const hal::Tensor& kv_len, int64_t T, int64_t Bs,
                 int64_t max_blocks, int64_t Qb) {
  MSA_CHECK_ARG(Qb >= 1, op, "Qb", "must be >= 1, got " + std::to_string(Qb));
  MSA_CHECK_ARG(Bs >= 1, op, "Bs", "must be >= 1, got " + std::to_string(Bs));
  const int64_t B = kv_len.present() ? kv_len.dim(0) : 0;
  MSA_CHECK_ARG(cu_q.present() && cu_q.rank == 1 && cu_q.dim(0) == B + 1, op, "cu_q",
                "must have B+1 = " + std::to_string(B + 1) + " entries");
  const int32_t* cu = cu_q.data<const int32_t>();
  const int32_t* kl = B > 0 ? kv_len.data<const int32_t>() : nullptr;
  MSA_CHECK_ARG(cu[0] == 0, op, "cu_q", "cu_q[0] must be 0, got " + std::to_string(cu[0]));
  if (T >= 0)
    MSA_CHECK_ARG(cu[B] == T, op, "cu_q",
                  "cu_q[B] = " + std::to_string(cu[B]) + " but there are " + std::to_string(T) + " query tokens");
  const int64_t max_tokens = max_blocks * Bs;

  Batch batch;
  batch.seqs.resize(static_cast<size_t>(B));
  int64_t nq = 0;
  for (int64_t b = 0; b < B; ++b) {
    const std::string at = "[" + std::to_string(b) + "]";
    MSA_CHECK_ARG(cu[b + 1] >= cu[b], op, "cu_q",
                  "must be non-decreasing: cu_q" + at + " = " + std::to_string(cu[b]) + " > cu_q[" +
                      std::to_string(b + 1) + "] = " + std::to_string(cu[b + 1]));
    Sequence& s = batch.seqs[static_cast<size_t>(b)];
    s.q_begin = cu[b];
    s.q_len = int64_t{cu[b + 1]} - cu[b];
    s.kv_len = kl[b];
    MSA_CHECK_ARG(s.kv_len >= s.q_len, op, "kv_len",
                  "kv_len" + at + " = " + std::to_string(s.kv_len) + " < q_len" + at + " = " + std::to_string(s.q_len) +
                      " (kv_len includes this call's tokens)");
    MSA_CHECK_ARG(
        s.kv_len <= max_tokens, op, "kv_len",
        "kv_len" + at + " = " + std::to_string(s.kv_len) + " > max_blocks * Bs = " + std::to_string(max_tokens));
    s.pos0 = s.kv_len - s.q_len;
    s.n_blocks = ceil_div(s.kv_len, Bs);
    s.qb_begin = nq;
    if (s.q_len > 0) {
      // Queries at positions pos0 .. pos0+q_len-1, grouped by floor(pos / Qb).
      const int64_t first = s.pos0 / Qb, last = (s.pos0 + s.q_len - 1) / Qb;
      s.n_qb = last - first + 1;
      for (int64_t blk = first; blk <= last; ++blk) {
        QueryBlock qb;
        qb.seq = b;
        qb.p0 = std::max(s.pos0, blk * Qb);
        qb.p1 = std::min(s.pos0 + s.q_len - 1, blk * Qb + Qb - 1);
        qb.t_begin = s.q_begin + (qb.p0 - s.pos0);
        qb.t_end = s.q_begin + (qb.p1 - s.pos0) + 1;
        batch.qblocks.push_back(qb);
      }
    }
    nq += s.n_qb;
  }
  return batch;
}

void check_nq(const char* op, const Batch& batch, int64_t NQ) {
  MSA_CHECK_ARG(
      NQ == batch.nq(), op, "NQ",
      "is " + std::to_string(NQ) + " but cu_q, kv_len and Qb give " + std::to_string(batch.nq()) + " query blocks");
}

void check_block_table(const char* op, const Batch& batch, const hal::Tensor& block_table, int64_t P) {
  const int64_t B = static_cast<int64_t>(batch.seqs.size());
  if (B == 0) return;
  MSA_CHECK_ARG(block_table.present() && block_table.rank == 2 && block_table.dim(0) == B, op, "block_table",
                "must be [B][max_blocks] with B = " + std::to_string(B));
  const int32_t* bt = block_table.data<const int32_t>();
  const int64_t mb = block_table.dim(1);
  for (int64_t b = 0; b < B; ++b) {
    const Sequence& s = batch.seqs[static_cast<size_t>(b)];
    for (int64_t c = 0; c < s.n_blocks; ++c) {
      const int32_t page = bt[b * mb + c];
      MSA_CHECK_ARG(page >= 0 && page < P, op, "block_table",
                    "block_table[" + std::to_string(b) + "][" + std::to_string(c) + "] = " + std::to_string(page) +
                        " is not a page id in [0, " + std::to_string(P) + ")");
    }
  }
}

}  // namespace msa::cpu_ref
