// The varlen batch as the kernels see it: sequences, positions and query blocks derived
// from cu_q / kv_len / Qb (docs/spec.md, "Sequences, positions, varlen packing" and
// "Query blocks"), with the index data validated before any work. The CPU backends throw
// msa::Error naming the argument for a bad entry, so nothing invalid is ever read.
#pragma once
#include <cstdint>
#include <vector>

#include "hal/tensor.h"

namespace msa::cpu {

// One sequence of the batch.
struct SeqInfo {
  int64_t q_begin = 0;   // first packed query token (cu_q[b])
  int64_t q_len = 0;     // query tokens of this call
  int64_t kv_len = 0;    // cached tokens, including this call's
  int64_t pos0 = 0;      // position of its first query: kv_len - q_len
  int64_t n_blocks = 0;  // logical KV blocks: ceil(kv_len / Bs)
  int64_t qb_begin = 0;  // global index of its first query block
  int64_t n_qb = 0;      // its query blocks
};

// One query block: the queries of one sequence with equal floor(pos / Qb).
struct QBlock {
  int64_t seq = 0;      // sequence index b
  int64_t t_begin = 0;  // packed tokens [t_begin, t_end)
  int64_t t_end = 0;
  int64_t p0 = 0;  // positions of its first and last query
  int64_t p1 = 0;
};

struct Batch {
  std::vector<SeqInfo> seqs;
  std::vector<QBlock> qblocks;  // sequence by sequence, in position order
  int64_t nq() const { return static_cast<int64_t>(qblocks.size()); }
};

// Reads and validates cu_q [B+1] and kv_len [B]: cu_q[0] == 0, non-decreasing, cu_q[B]
// == T (unless T < 0), 0 <= q_len <= kv_len <= max_blocks * Bs; numbers the query blocks
// of size Qb. Throws msa::Error naming "cu_q" or "kv_len".
Batch make_batch(const char* op, const hal::Tensor& cu_q, const hal::Tensor& kv_len, int64_t T, int64_t Bs,
                 int64_t max_blocks, int64_t Qb);

// Throws msa::Error naming "NQ" when it differs from the batch's query block count.
void check_nq(const char* op, const Batch& batch, int64_t NQ);

// Checks that every block_table entry that can be read (c < n_blocks) is a page id in
// [0, P). Throws msa::Error naming "block_table".
void check_block_table(const char* op, const Batch& batch, const hal::Tensor& block_table, int64_t P);

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace msa::cpu
