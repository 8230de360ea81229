#include "model/kv_cache.h"

#include <algorithm>
#include <string>

#include "hal/error.h"

namespace msa::model {

KvCache::KvCache(hal::Device& device, const Config& c, hal::DType dtype, hal::DType ki_dtype, int64_t num_pages,
                 bool poison)
    : device_(device), block_size_(c.sparse_block_size), num_pages_(num_pages) {
  MSA_CHECK_ARG(num_pages >= 0 && num_pages < INT32_MAX, "kv_cache", "num_pages",
                "must be in [0, 2^31), got " + std::to_string(num_pages));
  const int64_t P = num_pages, Bs = block_size_;
  auto make = [&](hal::DType t, std::initializer_list<int64_t> shape) {
    auto o = device_.alloc_tensor(t, shape);
    if (poison) device_.stream().fill_bytes(o.tensor, 0xFF);
    bytes_ += o.tensor.nbytes();
    buffers_.push_back(std::move(o.buffer));
    return o.tensor;
  };
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    LayerCache lc;
    lc.k_cache = make(dtype, {P, c.num_key_value_heads, Bs, c.head_dim});
    lc.v_cache = make(dtype, {P, c.num_key_value_heads, Bs, c.head_dim});
    if (!c.is_dense_layer(l)) {
      if (ki_dtype == hal::DType::fp4_e2m1x2) {  // NVFP4: two codes per byte, an e4m3 scale per 16 dims
        MSA_CHECK_ARG(c.sparse_index_dim % 16 == 0, "kv_cache", "ki_dtype",
                      "NVFP4 indexer keys need sparse_index_dim to be a multiple of 16, got " +
                          std::to_string(c.sparse_index_dim));
        lc.ki_cache = make(ki_dtype, {P, Bs, c.sparse_index_dim / 2});
        lc.ki_scale = make(hal::DType::fp8_e4m3, {P, Bs, c.sparse_index_dim / 16});
      } else {
        lc.ki_cache = make(ki_dtype, {P, Bs, c.sparse_index_dim});
        if (ki_dtype == hal::DType::fp8_e4m3) lc.ki_scale = make(hal::DType::f32, {P, Bs});
      }
    }
    layers_.push_back(lc);
  }
  free_.reserve(static_cast<size_t>(P));
  for (int64_t p = P - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

int64_t KvCache::pages_for(int64_t tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

int KvCache::add_sequence() {
  seqs_.push_back(Seq{});
  seqs_.back().live = true;
  return static_cast<int>(seqs_.size()) - 1;
}

int64_t KvCache::append(int seq, int64_t n) {
  MSA_CHECK_ARG(seq >= 0 && seq < static_cast<int>(seqs_.size()) && seqs_[seq].live, "kv_cache", "seq",
                "no live sequence " + std::to_string(seq));
  MSA_CHECK_ARG(n >= 0, "kv_cache", "n", "must be >= 0");
  Seq& s = seqs_[seq];
  const int64_t need = pages_for(s.len + n, block_size_) - static_cast<int64_t>(s.pages.size());
  if (need > static_cast<int64_t>(free_.size()))
    throw Error("kv_cache: out of pages (sequence " + std::to_string(seq) + " needs " + std::to_string(need) +
                " more, " + std::to_string(free_.size()) + " free of " + std::to_string(num_pages_) + ")");
  for (int64_t i = 0; i < need; ++i) {
    s.pages.push_back(free_.back());
    free_.pop_back();
  }
  s.len += n;
  return s.len;
}

void KvCache::release(int seq) {
  MSA_CHECK_ARG(seq >= 0 && seq < static_cast<int>(seqs_.size()) && seqs_[seq].live, "kv_cache", "seq",
                "no live sequence " + std::to_string(seq));
  Seq& s = seqs_[seq];
  for (auto it = s.pages.rbegin(); it != s.pages.rend(); ++it) free_.push_back(*it);
  s = Seq{};
}

int64_t KvCache::length(int seq) const { return seqs_.at(static_cast<size_t>(seq)).len; }

const std::vector<int32_t>& KvCache::pages(int seq) const { return seqs_.at(static_cast<size_t>(seq)).pages; }

hal::HostTensor KvCache::block_table(std::span<const int> seqs) const {
  size_t width = 1;
  for (int s : seqs) width = std::max(width, pages(s).size());
  hal::HostTensor t(hal::DType::i32, {static_cast<int64_t>(seqs.size()), static_cast<int64_t>(width)});
  int32_t* d = t.data<int32_t>();
  for (size_t b = 0; b < seqs.size(); ++b) {
    const auto& p = pages(seqs[b]);
    std::copy(p.begin(), p.end(), d + b * width);
  }
  return t;
}

}  // namespace msa::model
