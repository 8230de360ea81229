// Helpers of the backend-rule tests: the backends with a device here, and a small decode
// batch run through dense_attention or sparse_block_attention on one of them.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace msa::test::rules {

using msa::hal::DType;
using msa::hal::HostTensor;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Devices of the backends compiled in that have one here (cpu-ref, cpu, vulkan, ...).
inline std::vector<std::string> devices() {
  std::vector<std::string> d;
  for (const auto& b : msa::hal::list_backends())
    if (!b.devices.empty() && b.name != "auto") d.push_back(b.name);
  return d;
}

// Decode batch: B = 2 sequences (kv_len 13 and 9), Hq = 4, Hkv = 2, Bs = 8, D = 64.
struct Batch {
  HostTensor q{DType::f32, {2, 4, 64}}, k{DType::f32, {4, 2, 8, 64}}, v{DType::f32, {4, 2, 8, 64}};
  HostTensor table{DType::i32, {2, 2}}, kv_len{DType::i32, {2}}, cu_q{DType::i32, {3}};
  HostTensor block_idx{DType::i32, {2, 2, 2}};
  Batch() {
    for (auto* t : {&q, &k, &v})
      for (int64_t i = 0; i < t->numel(); ++i) t->set(i, 0.5f * std::sin(0.37f * static_cast<float>(i)));
    const int32_t tab[] = {0, 1, 2, 3}, len[] = {13, 9}, cu[] = {0, 1, 2};
    std::copy(tab, tab + 4, table.data<int32_t>());
    std::copy(len, len + 2, kv_len.data<int32_t>());
    std::copy(cu, cu + 3, cu_q.data<int32_t>());
    const int32_t idx[] = {0, 1, 0, 1, 0, 1, 0, 1};
    std::copy(idx, idx + 8, block_idx.data<int32_t>());
  }
  // Element d of token s (sequence 0: pages 0, 1; sequence 1: pages 2, 3) of KV head g.
  size_t at(int seq, int g, int s, int d) const {
    const int page = seq * 2 + s / 8;
    return static_cast<size_t>(((page * 2 + g) * 8 + s % 8) * 64 + d);
  }
};

struct Out {
  HostTensor out, lse;
};

// Runs the batch on `dev_name` (msa::Error from a device check propagates).
inline Out run(const std::string& dev_name, const Batch& b, bool sparse) {
  auto dev = msa::hal::create_device(dev_name);
  auto up = [&](const HostTensor& h) { return msa::hal::to_device(*dev, h); };
  auto q = up(b.q), k = up(b.k), v = up(b.v), tab = up(b.table), len = up(b.kv_len), cu = up(b.cu_q);
  auto idx = up(b.block_idx);
  auto out = dev->alloc_tensor(DType::f32, {2, 4, 64}), lse = dev->alloc_tensor(DType::f32, {2, 4});
  if (sparse) {
    msa::ops::SparseAttentionArgs a;
    a.q = q.tensor, a.k_cache = k.tensor, a.v_cache = v.tensor, a.block_table = tab.tensor;
    a.kv_len = len.tensor, a.cu_q = cu.tensor, a.block_idx = idx.tensor, a.NQ = 2;
    a.out = out.tensor, a.lse = lse.tensor;
    msa::ops::sparse_block_attention(*dev, a);
  } else {
    msa::ops::DenseAttentionArgs a;
    a.q = q.tensor, a.k_cache = k.tensor, a.v_cache = v.tensor, a.block_table = tab.tensor;
    a.kv_len = len.tensor, a.cu_q = cu.tensor, a.out = out.tensor, a.lse = lse.tensor;
    msa::ops::dense_attention(*dev, a);
  }
  dev->stream().synchronize();  // device-side checks raise here
  return {msa::hal::to_host(*dev, out.tensor), msa::hal::to_host(*dev, lse.tensor)};
}

}  // namespace msa::test::rules
