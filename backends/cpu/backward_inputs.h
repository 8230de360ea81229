// The inputs of one paged attention backward call (dense or sparse) as the per-target
// kernels read them: f32 copies of q, dout, the caches and lse, delta = dot(dout, out),
// and each (token, KV head)'s attended blocks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/token_blocks.h"
#include "hal/tensor.h"

namespace msa::cpu {

struct PagedBackwardInputs {
  const int32_t* block_table = nullptr;
  int64_t max_blocks = 0;
  int64_t T = 0, Hq = 0, D = 0, P = 0, Hkv = 0, Bs = 0, G = 0;
  float scale = 1;
  std::vector<float> q, dout, k, v, lse, delta;  // delta [T][Hq]
  TokenBlocks tb;                                // per (token, KV head)

  int64_t page(int64_t t, int64_t blk) const { return block_table[tb.seq[static_cast<size_t>(t)] * max_blocks + blk]; }
  // Slots of block blk that token t sees (its causal limit and its sequence's kv_len).
  int64_t visible(int64_t t, int64_t blk) const {
    return std::min({(blk + 1) * Bs, tb.kv_len[static_cast<size_t>(t)], tb.pos[static_cast<size_t>(t)] + 1}) - blk * Bs;
  }
};

}  // namespace msa::cpu
