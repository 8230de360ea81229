#include "backends/cpu/varlen.h"

#include <algorithm>
#include <string>

#include "hal/error.h"

namespace msa::cpu {

Batch make_batch(const char* op, const hal::Tensor& cu_q, const hal::Tensor& kv_len, int64_t T, int64_t Bs,
                 int64_t max_blocks, int64_t Qb) {
  const int64_t B = kv_len.dim(0);
  MSA_CHECK_ARG(cu_q.dim(0) == B + 1, op, "cu_q", "must have B+1 = " + std::to_string(B + 1) + " entries");
  const int32_t* cq = cu_q.data<const int32_t>();
  const int32_t* kl = kv_len.data<const int32_t>();
  MSA_CHECK_ARG(cq[0] == 0, op, "cu_q", "cu_q[0] must be 0, got " + std::to_string(cq[0]));
  Batch batch;
  batch.seqs.resize(static_cast<size_t>(B));
  const int64_t max_tokens = max_blocks * Bs;
  int64_t qb_next = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t q0 = cq[b], q1 = cq[b + 1], kv = kl[b];
    MSA_CHECK_ARG(q1 >= q0, op, "cu_q",
                  "must be non-decreasing, cu_q[" + std::to_string(b + 1) + "] = " + std::to_string(q1) + " < cu_q[" +
                      std::to_string(b) + "] = " + std::to_string(q0));
    MSA_CHECK_ARG(kv >= q1 - q0 && kv <= max_tokens, op, "kv_len",
                  "kv_len[" + std::to_string(b) + "] = " + std::to_string(kv) + " must be in [q_len = " +
                      std::to_string(q1 - q0) + ", max_blocks * Bs = " + std::to_string(max_tokens) + "]");
    SeqInfo& s = batch.seqs[static_cast<size_t>(b)];
    s.q_begin = q0;
    s.q_len = q1 - q0;
    s.kv_len = kv;
    s.pos0 = kv - s.q_len;
    s.n_blocks = ceil_div(kv, Bs);
    s.qb_begin = qb_next;
    for (int64_t i = 0; i < s.q_len;) {
      const int64_t pos = s.pos0 + i;
      const int64_t end_pos = (pos / Qb + 1) * Qb;  // first position of the next block
      const int64_t n = std::min<int64_t>(end_pos - pos, s.q_len - i);
      batch.qblocks.push_back(QBlock{b, q0 + i, q0 + i + n, pos, pos + n - 1});
      i += n;
    }
    s.n_qb = static_cast<int64_t>(batch.qblocks.size()) - qb_next;
    qb_next = static_cast<int64_t>(batch.qblocks.size());
  }
  if (T >= 0)
    MSA_CHECK_ARG(cq[B] == T, op, "cu_q",
                  "cu_q[B] = " + std::to_string(cq[B]) + " must equal T = " + std::to_string(T));
  return batch;
}

void check_nq(const char* op, const Batch& batch, int64_t NQ) {
  MSA_CHECK_ARG(
      NQ == batch.nq(), op, "NQ",
      "is " + std::to_string(NQ) + " but cu_q, kv_len and Qb give " + std::to_string(batch.nq()) + " query blocks");
}

void check_block_table(const char* op, const Batch& batch, const hal::Tensor& block_table, int64_t P) {
  const int32_t* bt = block_table.data<const int32_t>();
  const int64_t mb = block_table.dim(1);
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const SeqInfo& s = batch.seqs[b];
    for (int64_t c = 0; c < s.n_blocks; ++c) {
      const int32_t p = bt[static_cast<int64_t>(b) * mb + c];
      MSA_CHECK_ARG(p >= 0 && p < P, op, "block_table",
                    "block_table[" + std::to_string(b) + "][" + std::to_string(c) + "] = " + std::to_string(p) +
                        " is not a page id in [0, " + std::to_string(P) + ")");
    }
  }
}

}  // namespace msa::cpu
