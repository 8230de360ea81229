// The non-finite rule of docs/spec.md ("Non-finite inputs") on every backend with a
// device here: NaN or Inf in an attended key or value, or logits that overflow f32, give
// NaN in the row's out and lse (never the empty-set result out = 0, lse = -inf); rows that
// do not attend the bad token, and an empty selection, are unaffected.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Devices of the backends compiled in that have one here (cpu-ref, cpu, vulkan, ...).
std::vector<std::string> devices() {
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

Out run(const std::string& dev_name, const Batch& b, bool sparse) {
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
  return {msa::hal::to_host(*dev, out.tensor), msa::hal::to_host(*dev, lse.tensor)};
}

// Rows (t, h): sequence t, heads 2g, 2g+1 read KV head g.
void expect_rows(const Out& o, const std::function<bool(int t, int h)>& nan_row, const std::string& what) {
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < 4; ++h) {
      const float lse = o.lse.get(static_cast<size_t>(t * 4 + h));
      bool out_nan = true, out_finite = true;
      for (int d = 0; d < 64; ++d) {
        const float x = o.out.get(static_cast<size_t>((t * 4 + h) * 64 + d));
        out_nan &= std::isnan(x);
        out_finite &= std::isfinite(x);
      }
      if (nan_row(t, h)) {
        EXPECT_TRUE(std::isnan(lse) && out_nan) << what << ": row (" << t << ", " << h << ") lse " << lse;
      } else {
        EXPECT_TRUE(std::isfinite(lse) && out_finite) << what << ": row (" << t << ", " << h << ") lse " << lse;
      }
    }
}

TEST(NonFinite, AttendedNanOrInfGivesNanRows) {
  for (const std::string& dev : devices())
    for (bool sparse : {false, true}) {
      const std::string tag = dev + (sparse ? " sparse" : " dense");
      auto seq0_g1 = [](int t, int h) { return t == 0 && h / 2 == 1; };
      for (float bad : {kNaN, kInf, -kInf}) {
        Batch b;
        b.k.set(b.at(0, 1, 3, 5), bad);  // a valid key of sequence 0, KV head 1
        expect_rows(run(dev, b, sparse), seq0_g1, tag + " key " + std::to_string(bad));
        Batch c;
        c.v.set(c.at(0, 1, 10, 7), bad);  // a valid value
        expect_rows(run(dev, c, sparse), seq0_g1, tag + " value " + std::to_string(bad));
      }
      Batch q;
      q.q.set(static_cast<size_t>((1 * 4 + 0) * 64 + 2), kNaN);  // query of (t 1, h 0)
      expect_rows(run(dev, q, sparse), [](int t, int h) { return t == 1 && h == 0; }, tag + " query NaN");
      Batch big;  // finite inputs whose logits overflow f32 for (t 1, h 3)
      for (int d = 0; d < 64; ++d) big.q.set(static_cast<size_t>((1 * 4 + 3) * 64 + d), 1e30f);
      for (int d = 0; d < 64; ++d) big.k.set(big.at(1, 1, 4, d), 1e30f);
      expect_rows(run(dev, big, sparse), [](int t, int h) { return t == 1 && h == 3; }, tag + " overflow");
      Batch slack;  // NaN past kv_len (sequence 1 ends at 9): no effect
      slack.k.set(slack.at(1, 0, 12, 0), kNaN);
      slack.v.set(slack.at(1, 0, 12, 0), kNaN);
      expect_rows(run(dev, slack, sparse), [](int, int) { return false; }, tag + " slack");
    }
}

// Nothing selected stays the empty-set result, distinct from NaN.
TEST(NonFinite, EmptySelectionIsZeroAndMinusInf) {
  for (const std::string& dev : devices()) {
    Batch b;
    std::fill(b.block_idx.data<int32_t>(), b.block_idx.data<int32_t>() + 8, -1);
    const Out o = run(dev, b, true);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(o.lse.get(static_cast<size_t>(i)), -kInf) << dev;
    for (int64_t i = 0; i < o.out.numel(); ++i) ASSERT_EQ(o.out.get(static_cast<size_t>(i)), 0.0f) << dev;
  }
}

}  // namespace
