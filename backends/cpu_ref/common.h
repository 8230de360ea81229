// Shared bookkeeping of the cpu-ref attention kernels: the varlen batch (sequences,
// positions, query blocks) derived from cu_q / kv_len / Qb, eager validation of that
// index data and of page ids, and element access in double precision.
//
// The reference checks every index entry it could read before doing any work and throws
// msa::Error naming the argument (docs/spec.md, "Validity"), so a bad entry can never be
// dereferenced and no output is half written.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "hal/dtype.h"
#include "hal/error.h"
#include "hal/tensor.h"

namespace msa::cpu_ref {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Element i of a float tensor (f32, bf16, f16, fp8_e4m3) as double.
inline double load(const hal::Tensor& t, int64_t i) {
  return static_cast<double>(hal::load_as_f32(t.dtype, t.data<const uint8_t>(), static_cast<size_t>(i)));
}

// Stores x into element i of a float tensor. The only rounding is x -> f32 -> dtype
// (round to nearest even each step); the double-rounding case this allows is far below
// every tolerance of the contract.
inline void store(const hal::Tensor& t, int64_t i, double x) {
  hal::store_from_f32(t.dtype, t.data<uint8_t>(), static_cast<size_t>(i), static_cast<float>(x));
}

// Resolves scale = 0 to 1/sqrt(dim) rounded to f32, as ops:: does before dispatch.
inline double resolve_scale(float scale, int64_t dim) {
  return static_cast<double>(scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))));
}

// Dot product in double with four interleaved partial sums: a fixed order (so results are
// reproducible) that runs several times faster than one dependent chain of adds.
template <typename A, typename B>
inline double dot(const A* a, const B* b, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    s1 += static_cast<double>(a[i + 1]) * static_cast<double>(b[i + 1]);
    s2 += static_cast<double>(a[i + 2]) * static_cast<double>(b[i + 2]);
    s3 += static_cast<double>(a[i + 3]) * static_cast<double>(b[i + 3]);
  }
  for (; i < n; ++i) s0 += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return (s0 + s1) + (s2 + s3);
}

// ceil(a / b) for a >= 0, b > 0.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One sequence of a varlen batch.
struct Sequence {
  int64_t q_begin = 0;   // first packed query token (cu_q[b])
  int64_t q_len = 0;     // query tokens of this call
  int64_t kv_len = 0;    // cached tokens, including this call's
  int64_t pos0 = 0;      // position of the first query: kv_len - q_len
  int64_t n_blocks = 0;  // logical KV blocks: ceil(kv_len / Bs)
  int64_t qb_begin = 0;  // global index of its first query block
  int64_t n_qb = 0;      // its query blocks
};

// One query block: the queries of one sequence with equal floor(pos / Qb).
struct QueryBlock {
  int64_t seq = 0;      // sequence index b
  int64_t t_begin = 0;  // packed tokens [t_begin, t_end)
  int64_t t_end = 0;
  int64_t p0 = 0;  // position of the first / last query of the block
  int64_t p1 = 0;
};

struct Batch {
  std::vector<Sequence> seqs;
  std::vector<QueryBlock> qblocks;  // in the contract's order: sequence by sequence

  int64_t nq() const { return static_cast<int64_t>(qblocks.size()); }
};

// Reads and validates cu_q [B+1] and kv_len [B] (B = kv_len.dim(0)):
// cu_q[0] == 0, cu_q non-decreasing, cu_q[B] == T (skipped when T < 0),
// 0 <= q_len <= kv_len <= max_tokens (max_blocks * Bs), then numbers the query blocks
// of size Qb (>= 1). Throws msa::Error naming "cu_q" or "kv_len".
Batch make_batch(const char* op, const hal::Tensor& cu_q, const hal::Tensor& kv_len, int64_t T, int64_t Bs,
                 int64_t max_blocks, int64_t Qb);

// Throws msa::Error naming "NQ" when the caller's NQ differs from the batch's count.
void check_nq(const char* op, const Batch& batch, int64_t NQ);

// Checks every block_table entry that can be read (c < n_blocks of its sequence) is a
// page id in [0, P). Throws msa::Error naming "block_table".
void check_block_table(const char* op, const Batch& batch, const hal::Tensor& block_table, int64_t P);

// Page of logical block c of sequence b (validated by check_block_table).
inline int64_t page_of(const hal::Tensor& block_table, int64_t b, int64_t c) {
  return block_table.data<const int32_t>()[b * block_table.dim(1) + c];
}

}  // namespace msa::cpu_ref
