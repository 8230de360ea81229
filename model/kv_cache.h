// model::KvCache: the paged, block-major KV cache of docs/spec.md for every layer, and
// the page bookkeeping of a batch of sequences. A page holds Bs tokens; sequence s owns
// the pages of its logical blocks 0, 1, ... in order; pages are taken from a fixed pool
// exactly as tokens arrive (no page beyond the one holding the last token) and return
// to the pool when the sequence is released.
//
// Per layer: k_cache, v_cache [P][Hkv][Bs][D] (the activation dtype) and, for MSA
// layers, ki_cache [P][Bs][Di] (bf16, f32 or fp8_e4m3, with ki_scale [P][Bs] f32 for fp8;
// NVFP4: [P][Bs][Di/2] fp4_e2m1x2 with ki_scale [P][Bs][Di/16] fp8_e4m3).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "hal/device.h"
#include "hal/export.h"
#include "hal/host_tensor.h"
#include "model/config.h"

namespace msa::model {

struct LayerCache {
  hal::Tensor k_cache, v_cache;  // [P][Hkv][Bs][D]
  hal::Tensor ki_cache;          // [P][Bs][Di]; absent on dense layers
  hal::Tensor ki_scale;          // [P][Bs] f32 (fp8 keys) or [P][Bs][Di/16] e4m3 (NVFP4)
};

class MSA_API KvCache {
 public:
  // A pool of `num_pages` pages per layer on `device`. With `poison`, every slot starts
  // as NaN bytes (0xFF), so reading a slot never written shows up in the results.
  KvCache(hal::Device& device, const Config& config, hal::DType dtype, hal::DType ki_dtype, int64_t num_pages,
          bool poison = false);

  // Pages needed for `tokens` tokens: ceil(tokens / Bs).
  static int64_t pages_for(int64_t tokens, int block_size);

  // A new, empty sequence; returns its id.
  int add_sequence();
  // Grows sequence `seq` by `n` tokens, taking pages from the pool as needed; throws
  // msa::Error when the pool is exhausted. Returns the new length.
  int64_t append(int seq, int64_t n);
  // Returns the sequence's pages to the pool; the id may not be used again.
  void release(int seq);

  int64_t length(int seq) const;
  const std::vector<int32_t>& pages(int seq) const;
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_pages() const { return num_pages_; }
  int block_size() const { return block_size_; }

  // block_table [B][max_blocks] i32 for `seqs` in order: row b lists the pages of
  // seqs[b]; max_blocks is the largest page count (at least 1); unused entries are 0.
  hal::HostTensor block_table(std::span<const int> seqs) const;

  const LayerCache& layer(int l) const { return layers_[l]; }
  // Bytes of all cache tensors.
  size_t bytes() const { return bytes_; }

 private:
  struct Seq {
    int64_t len = 0;
    std::vector<int32_t> pages;
    bool live = false;
  };
  hal::Device& device_;
  int block_size_;
  int64_t num_pages_;
  std::vector<hal::BufferPtr> buffers_;
  std::vector<LayerCache> layers_;
  std::vector<Seq> seqs_;
  std::vector<int32_t> free_;  // a stack; lowest page ids are handed out first
  size_t bytes_ = 0;
};

}  // namespace msa::model
