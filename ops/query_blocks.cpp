#include <string>

#include "hal/error.h"
#include "ops/ops.h"

namespace msa::ops {

int64_t count_query_blocks(std::span<const int32_t> cu_q, std::span<const int32_t> kv_len, int Qb) {
  if (Qb < 1 || Qb > 128 || (Qb & (Qb - 1)) != 0)
    throw_arg_error("count_query_blocks", "Qb", "must be 1 or a power of two up to 128, got " + std::to_string(Qb));
  if (cu_q.size() != kv_len.size() + 1)
    throw_arg_error("count_query_blocks", "cu_q", "must have one more entry than kv_len");
  int64_t nq = 0;
  for (size_t b = 0; b < kv_len.size(); ++b) {
    const int64_t q_len = int64_t{cu_q[b + 1]} - cu_q[b];
    if (q_len < 0) throw_arg_error("count_query_blocks", "cu_q", "must be non-decreasing");
    if (kv_len[b] < q_len)
      throw_arg_error("count_query_blocks", "kv_len",
                      "kv_len[" + std::to_string(b) + "] is less than the query length");
    if (q_len == 0) continue;
    const int64_t first = kv_len[b] - q_len, last = int64_t{kv_len[b]} - 1;
    nq += last / Qb - first / Qb + 1;
  }
  return nq;
}

}  // namespace msa::ops
