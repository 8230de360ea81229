// Per-token bookkeeping of the training kernels: each packed token's sequence, position
// and kv_len, and the logical KV blocks each (token, head) attends, as a CSR list.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu_ref/common.h"
#include "hal/tensor.h"

namespace msa::cpu {

struct TokenBlocks {
  std::vector<int64_t> seq, pos, kv_len;  // per token
  std::vector<int64_t> list_begin;        // [T * heads + 1]
  std::vector<int32_t> list;              // blocks of (t, g) at list_begin[t*heads+g] ..

  TokenBlocks() = default;
  // block_idx == nullptr: every block up to the token's position (dense). Else the
  // in-range entries of block_idx[qb(t)][shared ? 0 : g] that start at or before it.
  TokenBlocks(const cpu_ref::Batch& batch, int64_t T, const hal::Tensor* block_idx, bool shared, int64_t heads,
              int64_t Bs);
};

}  // namespace msa::cpu
