// Head-parallel model runs (model::shard_weights + all-reduced projections) against the
// single-device model: one rank is bit for bit the same; two ranks differ only by the
// rounding of the all-reduced partial sums.
#include <gtest/gtest.h>

#include "../model/test_util.h"
#include "dist/world.h"
#include "hal/error.h"
#include "hal/registry.h"
#include "model/head_parallel.h"

namespace msa::dist {
namespace {

using model::testing::RunSpec;

RunSpec spec() {
  RunSpec s;
  const model::Config& c = model::testing::tiny_weights().config;
  s.text = {model::random_tokens(c, 330, 21), model::random_tokens(c, 120, 22)};
  s.video = true;
  s.gen = 3;
  return s;
}

// Generation on `world` ranks of `backend`; rank 0's result.
model::GenerateResult run_ranks(const std::string& backend, int world, const RunSpec& s) {
  World w(backend, world);
  model::GenerateResult out;
  w.run([&](Communicator& c) {
    const model::Weights shard = model::shard_weights(model::testing::tiny_weights(), c.rank(), c.world());
    model::Model m(c.device(), shard, s.dtype, false, &c);
    hal::Device::Owned vis;
    if (s.video) vis = model::encode_video_rows(m, model::testing::tiny_video(), static_cast<int>(s.text.size()));
    model::SessionOptions o;
    o.decode_steps = s.gen - 1;
    o.keep_logits = true;
    model::Session sess(m, model::testing::prompts_of(shard.config, s), vis.tensor, o);
    model::GenerateResult r = model::generate(sess, s.gen);
    if (c.rank() == 0) out = std::move(r);
  });
  return out;
}

TEST(HeadParallel, ShardConfigDividesHeadsAndMlp) {
  const model::Config& c = model::testing::tiny_weights().config;
  const model::Config s = model::shard_config(c, 2);
  EXPECT_EQ(s.num_attention_heads, c.num_attention_heads / 2);
  EXPECT_EQ(s.num_key_value_heads, c.num_key_value_heads / 2);
  EXPECT_EQ(s.sparse_num_index_heads, c.sparse_num_index_heads / 2);
  EXPECT_EQ(s.intermediate_size, c.intermediate_size / 2);
  EXPECT_EQ(s.hidden_size, c.hidden_size);
  try {
    model::shard_config(c, 3);
    FAIL() << "3 ranks cannot split 2 KV heads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--gpus"), std::string::npos) << e.what();
  }
}

TEST(HeadParallel, ShardsTileTheOriginalWeights) {
  const model::Weights& w = model::testing::tiny_weights();
  const model::Weights a = model::shard_weights(w, 0, 2), b = model::shard_weights(w, 1, 2);
  const std::string q = "model.layers.1.self_attn.q_proj.weight", o = "model.layers.1.self_attn.o_proj.weight";
  const auto& full_q = w.at(q);
  ASSERT_EQ(a.at(q).shape[0] * 2, full_q.shape[0]);
  // Rows of q_proj: rank 0 the first half, rank 1 the second.
  EXPECT_TRUE(std::equal(a.at(q).bytes.begin(), a.at(q).bytes.end(), full_q.bytes.begin()));
  EXPECT_TRUE(std::equal(b.at(q).bytes.begin(), b.at(q).bytes.end(), full_q.bytes.begin() + full_q.nbytes() / 2));
  // Columns of o_proj: element (i, j) of rank 1 is (i, j + n/2) of the original.
  const auto& full_o = w.at(o);
  const int64_t n = full_o.shape[1];
  for (int64_t i = 0; i < full_o.shape[0]; i += 17)
    for (int64_t j = 0; j < n / 2; j += 5) EXPECT_EQ(b.at(o).get(i * (n / 2) + j), full_o.get(i * n + j + n / 2));
  // The indexer key projection is replicated.
  const std::string ki = "model.layers.1.self_attn.indexer.k_proj.weight";
  EXPECT_EQ(a.at(ki).bytes, w.at(ki).bytes);
}

TEST(HeadParallel, OneRankIsBitwiseTheSingleDevicePath) {
  const RunSpec s = spec();
  auto dev = model::testing::cpu_ref();
  const model::GenerateResult single = model::testing::run_spec(*dev, model::testing::tiny_weights(), s);
  const model::GenerateResult one = run_ranks("cpu-ref", 1, s);
  EXPECT_EQ(one.tokens, single.tokens);
  EXPECT_EQ(one.logits, single.logits);
}

TEST(HeadParallel, TwoRanksMatchTheSingleDevicePath) {
  for (const char* backend : {"cpu-ref", "cpu"}) {
    bool present = false;
    for (const auto& b : hal::list_backends()) present |= b.name == backend && !b.devices.empty();
    if (!present) continue;
    SCOPED_TRACE(backend);
    const RunSpec s = spec();
    auto dev = hal::create_device(backend);
    const model::GenerateResult single = model::testing::run_spec(*dev, model::testing::tiny_weights(), s);
    const model::GenerateResult two = run_ranks(backend, 2, s);
    EXPECT_EQ(two.tokens, single.tokens);
    ASSERT_EQ(two.logits.size(), single.logits.size());
    for (size_t step = 0; step < single.logits.size(); ++step)
      for (size_t b = 0; b < single.logits[step].size(); ++b)
        EXPECT_LE(model::testing::nmse(two.logits[step][b], single.logits[step][b]), 2e-4)
            << "step " << step << " sequence " << b;
  }
}

TEST(HeadParallel, TwoGpusMatchOneGpu) {
  int n = 0;
  for (const auto& b : hal::list_backends())
    if (b.name == "cuda") n = static_cast<int>(b.devices.size());
  if (n < 1) GTEST_SKIP() << "no CUDA device here: runs on the GPU machine";
  const RunSpec s = spec();
  auto dev = hal::create_device("cuda:0");
  const model::GenerateResult single = model::testing::run_spec(*dev, model::testing::tiny_weights(), s);
  const model::GenerateResult one = run_ranks("cuda", 1, s);
  EXPECT_EQ(one.tokens, single.tokens);
  EXPECT_EQ(one.logits, single.logits) << "one NCCL rank must be bit for bit the single-GPU path";
  if (n < 2) GTEST_SKIP() << "one CUDA device: the 2-rank comparison needs two";
  const model::GenerateResult two = run_ranks("cuda", 2, s);
  // Two ranks round each partial projection to bf16 before the sum; on the GPU that can
  // flip a near-tie of the block selection in a later step, which moves that step's
  // logits by more than rounding (seen: one row of 6 at NMSE 3e-3). So: the prefill's
  // tokens agree, most rows are within rounding, none is far off.
  ASSERT_EQ(two.tokens.size(), single.tokens.size());
  for (size_t b = 0; b < single.tokens.size(); ++b) EXPECT_EQ(two.tokens[b][0], single.tokens[b][0]);
  int close = 0, rows = 0;
  for (size_t step = 0; step < single.logits.size(); ++step)
    for (size_t b = 0; b < single.logits[step].size(); ++b) {
      const double e = model::testing::nmse(two.logits[step][b], single.logits[step][b]);
      EXPECT_LE(e, 1e-2) << "step " << step << " sequence " << b;
      close += e <= 2e-4;
      ++rows;
    }
  EXPECT_GE(close * 3, rows * 2) << close << " of " << rows << " rows within 2e-4";
}

}  // namespace
}  // namespace msa::dist
