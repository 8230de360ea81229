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

// The shared core of the attention backward ops (attention_backward.cpp).
// delta[r] = dot(dout row r, out row r) over rows of D elements.
std::vector<float> row_dots(const std::vector<float>& dout, const std::vector<float>& out, int64_t D);
// A paged call's inputs in f32, with the (token, KV head) block lists `tb`.
PagedBackwardInputs paged_backward_inputs(const hal::Tensor& dout, const hal::Tensor& q, const hal::Tensor& k_cache,
                                          const hal::Tensor& v_cache, const hal::Tensor& block_table,
                                          const hal::Tensor& out, const hal::Tensor& lse, float scale, TokenBlocks tb);
// dq, dk_cache and dv_cache (f32) of a paged call.
void run_paged_backward(const PagedBackwardInputs& c, const hal::Tensor& dq_out, const hal::Tensor& dk_out,
                        const hal::Tensor& dv_out);

}  // namespace msa::cpu
