// ops::indexer_topk as a composite op: a backend's fused kernel runs when it takes the
// args; where it declines (returns false) or is absent, the two parts run in order.
#include <gtest/gtest.h>

#include "hal/host_device.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;
using msa::hal::OpId;

msa::hal::KernelTable g_ref;  // cpu-ref's kernels
int g_fused_calls = 0, g_part_calls = 0;
bool g_fused_accepts = false;

void counted_indexer(msa::hal::Stream& s, const msa::ops::IndexerScoreArgs& a) {
  ++g_part_calls;
  g_ref[OpId::indexer_score].run(s, &a);
}
void counted_topk(msa::hal::Stream& s, const msa::ops::BlockTopkArgs& a) {
  ++g_part_calls;
  g_ref[OpId::block_topk].run(s, &a);
}
// A "fused" kernel made of the reference's parts; declines unless g_fused_accepts.
bool fused(msa::hal::Stream& s, const msa::ops::IndexerTopkArgs& a) {
  ++g_fused_calls;
  if (!g_fused_accepts) return false;
  g_ref[OpId::indexer_score].run(s, &a.indexer);
  g_ref[OpId::block_topk].run(s, &a.topk);
  return true;
}

class CompositeOp : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ref = msa::hal::create_device("cpu-ref")->kernels();
    g_fused_calls = g_part_calls = 0;
    g_fused_accepts = false;
  }
  // A cpu-ref device with counted parts and, optionally, the fused kernel.
  msa::hal::Device& device(bool with_fused) {
    msa::hal::KernelTable t = g_ref;
    t.set(OpId::indexer_score, &counted_indexer);
    t.set(OpId::block_topk, &counted_topk);
    if (with_fused) t.set(OpId::indexer_topk, &fused);
    devices_.push_back(std::make_unique<msa::hal::HostDevice>("composite", "composite", t, 1));
    return *devices_.back();
  }
  // Runs indexer_topk on one decode query over 4 blocks of 4 keys; returns block_idx.
  std::vector<int32_t> run(msa::hal::Device& d) {
    auto up = [&](const HostTensor& h) {
      keep_.push_back(msa::hal::to_device(d, h));
      return keep_.back().tensor;
    };
    auto i32 = [&](std::vector<int64_t> shape, std::vector<int32_t> v) {
      HostTensor h(DType::i32, std::move(shape));
      std::copy(v.begin(), v.end(), h.data<int32_t>());
      return up(h);
    };
    HostTensor qi(DType::f32, {1, 1, 8}), ki(DType::f32, {4, 4, 8});
    for (int64_t i = 0; i < qi.numel(); ++i) qi.set(i, 1.0f);
    for (int64_t i = 0; i < ki.numel(); ++i) ki.set(i, static_cast<float>((i * 7) % 5) - 2.0f);
    msa::ops::IndexerTopkArgs a;
    a.indexer.qi = up(qi);
    a.indexer.ki_cache = up(ki);
    a.indexer.block_table = i32({1, 4}, {0, 1, 2, 3});
    a.indexer.kv_len = i32({1}, {16});
    a.indexer.cu_q = i32({2}, {0, 1});
    a.indexer.NQ = 1;
    a.indexer.block_score = up(HostTensor(DType::f32, {1, 1, 4}));
    a.topk.block_score = a.indexer.block_score;
    a.topk.kv_len = a.indexer.kv_len;
    a.topk.cu_q = a.indexer.cu_q;
    a.topk.NQ = 1;
    a.topk.Bs = 4;
    a.topk.k = 2;
    a.topk.block_idx = up(HostTensor(DType::i32, {1, 1, 2}));
    a.topk.block_cnt = up(HostTensor(DType::i32, {1, 1}));
    msa::ops::indexer_topk(d, a);
    const HostTensor idx = msa::hal::to_host(d, a.topk.block_idx);
    return {idx.data<int32_t>(), idx.data<int32_t>() + idx.numel()};
  }

 private:
  std::vector<std::unique_ptr<msa::hal::Device>> devices_;  // outlive the buffers in keep_
  std::vector<msa::hal::Device::Owned> keep_;
};

TEST_F(CompositeOp, IsAnOpOfTheList) {
  OpId op{};
  ASSERT_TRUE(msa::hal::parse_op("indexer_topk", op));
  EXPECT_EQ(op, OpId::indexer_topk);
  EXPECT_TRUE(msa::hal::is_composite(op));
  EXPECT_FALSE(msa::hal::is_composite(OpId::indexer_score));
  // cpu-ref has no fused kernel and says so.
  EXPECT_FALSE(g_ref.has(OpId::indexer_topk));
  EXPECT_NE(g_ref[OpId::indexer_topk].reason.find("runs as its parts"), std::string::npos);
}

TEST_F(CompositeOp, WithoutAFusedKernelRunsTheParts) {
  const auto idx = run(device(false));
  EXPECT_EQ(g_part_calls, 2);
  EXPECT_EQ(idx.back(), 3);  // the local block is always selected
}

TEST_F(CompositeOp, ADecliningFusedKernelFallsBackToTheParts) {
  const auto want = run(device(false));
  g_part_calls = 0;
  EXPECT_EQ(run(device(true)), want);
  EXPECT_EQ(g_fused_calls, 1);
  EXPECT_EQ(g_part_calls, 2);
}

TEST_F(CompositeOp, AnAcceptingFusedKernelRunsAlone) {
  const auto want = run(device(false));
  g_part_calls = 0;
  g_fused_accepts = true;
  EXPECT_EQ(run(device(true)), want);
  EXPECT_EQ(g_fused_calls, 1);
  EXPECT_EQ(g_part_calls, 0);
}

}  // namespace
