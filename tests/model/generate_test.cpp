// End-to-end generation with the tiny preset on cpu-ref: determinism, chunking,
// batch independence, cache hygiene, sparse vs dense, save/load, other backends.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "hal/error.h"
#include "model/run.h"
#include "test_util.h"

namespace msa::model {
namespace {

using testing::RunSpec;

// Text prompts longer than k * Bs = 256 tokens, so the MSA layer really selects.
RunSpec long_spec() {
  RunSpec s;
  const Config& c = testing::tiny_weights().config;
  s.text = {random_tokens(c, 330, 11), random_tokens(c, 150, 12)};
  s.video = true;
  s.gen = 3;
  return s;
}

void expect_same(const GenerateResult& a, const GenerateResult& b, size_t seq_a = 0, size_t seq_b = 0,
                 size_t count = SIZE_MAX) {
  const size_t n = std::min(count, a.tokens.size() - seq_a);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(a.tokens[seq_a + i], b.tokens[seq_b + i]) << "sequence " << seq_a + i;
    for (size_t step = 0; step < a.logits.size(); ++step)
      EXPECT_EQ(a.logits[step][seq_a + i], b.logits[step][seq_b + i]) << "step " << step << " sequence " << seq_a + i;
  }
}

TEST(ModelGenerate, TinyEndToEndOnCpuRef) {
  auto dev = testing::cpu_ref();
  const RunSpec s = long_spec();
  const GenerateResult r = testing::run_spec(*dev, testing::tiny_weights(), s);
  ASSERT_EQ(r.tokens.size(), 2u);
  ASSERT_EQ(r.logits.size(), 3u);
  const Config& c = testing::tiny_weights().config;
  for (size_t b = 0; b < 2; ++b) {
    ASSERT_EQ(r.tokens[b].size(), 3u);
    for (size_t step = 0; step < 3; ++step) {
      const auto& lg = r.logits[step][b];
      ASSERT_EQ(lg.size(), static_cast<size_t>(c.vocab_size));
      for (float v : lg) ASSERT_TRUE(std::isfinite(v));
      // The token is the argmax of the logits (ties: lowest id).
      const auto best = std::max_element(lg.begin(), lg.end()) - lg.begin();
      EXPECT_EQ(r.tokens[b][step], best) << "sequence " << b << " step " << step;
    }
  }
  // Logits depend on the prompt: the two sequences differ.
  EXPECT_NE(r.logits[0][0], r.logits[0][1]);
  // With 338 tokens of context the MSA layer reads at most 4 blocks of 64.
  EXPECT_GT(r.decode_selection.count, 0);
  EXPECT_LT(r.decode_selection.mean(), 0.95);
  EXPECT_GT(r.decode_selection.mean(), 0.3);
  // Same inputs, same bits.
  expect_same(r, testing::run_spec(*dev, testing::tiny_weights(), s));
}

TEST(ModelGenerate, ChunkedPrefillMatchesOneChunk) {
  auto dev = testing::cpu_ref();
  RunSpec s = long_spec();
  const GenerateResult one = testing::run_spec(*dev, testing::tiny_weights(), s);
  s.max_chunk = 37;  // chunks split sequences, the vision rows and blocks unevenly
  const GenerateResult many = testing::run_spec(*dev, testing::tiny_weights(), s);
  expect_same(one, many);
  s.max_chunk = 64;
  expect_same(one, testing::run_spec(*dev, testing::tiny_weights(), s));
}

TEST(ModelGenerate, SequenceIsIndependentOfItsBatch) {
  auto dev = testing::cpu_ref();
  RunSpec s = long_spec();
  const Config& c = testing::tiny_weights().config;
  s.text.push_back(random_tokens(c, 70, 13));
  const GenerateResult all = testing::run_spec(*dev, testing::tiny_weights(), s);
  for (size_t b = 0; b < s.text.size(); ++b) {
    RunSpec one = s;
    one.text = {s.text[b]};
    expect_same(all, testing::run_spec(*dev, testing::tiny_weights(), one), b, 0, 1);
  }
}

TEST(ModelGenerate, UnwrittenCacheSlotsDoNotLeak) {
  auto dev = testing::cpu_ref();
  RunSpec s = long_spec();
  const GenerateResult clean = testing::run_spec(*dev, testing::tiny_weights(), s);
  s.poison = true;  // every cache slot starts as NaN
  expect_same(clean, testing::run_spec(*dev, testing::tiny_weights(), s));
}

// NVFP4 indexer keys (kv_append quantizes them, indexer_topk reads them): the model runs
// end to end, the selection still drops blocks, the NaN group scales of unwritten slots
// (poisoned cache) do not leak, and the run is deterministic.
TEST(ModelGenerate, Nvfp4IndexerKeysEndToEnd) {
  auto dev = testing::cpu_ref();
  RunSpec s = long_spec();
  s.ki_dtype = hal::DType::fp4_e2m1x2;
  const GenerateResult r = testing::run_spec(*dev, testing::tiny_weights(), s);
  ASSERT_EQ(r.tokens.size(), 2u);
  for (const auto& step : r.logits)
    for (const auto& lg : step)
      for (float v : lg) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(r.decode_selection.count, 0);
  EXPECT_LT(r.decode_selection.mean(), 0.95);
  s.poison = true;
  expect_same(r, testing::run_spec(*dev, testing::tiny_weights(), s));
}

TEST(ModelGenerate, SparseEqualsDenseWhenSelectionCoversTheContext) {
  auto dev = testing::cpu_ref();
  RunSpec s;
  const Config& c0 = testing::tiny_weights().config;
  s.text = {random_tokens(c0, 330, 21)};
  s.gen = 3;
  s.dtype = hal::DType::f32;
  // k = 8 blocks of 64 covers the whole 332-token context: sparse attention is dense.
  Weights wide = testing::tiny_weights();
  wide.config.sparse_topk_blocks = 8;
  const GenerateResult sparse = testing::run_spec(*dev, wide, s);
  EXPECT_DOUBLE_EQ(sparse.decode_selection.mean(), 1.0);
  s.force_dense = true;
  const GenerateResult dense = testing::run_spec(*dev, wide, s);
  for (size_t step = 0; step < dense.logits.size(); ++step)
    EXPECT_LT(testing::nmse(sparse.logits[step][0], dense.logits[step][0]), 1e-10) << "step " << step;
  EXPECT_EQ(sparse.tokens, dense.tokens);
  // With k = 4 the selection drops blocks and the logits move away from dense.
  s.force_dense = false;
  const GenerateResult narrow = testing::run_spec(*dev, testing::tiny_weights(), s);
  EXPECT_LT(narrow.decode_selection.mean(), 0.95);
  EXPECT_GT(testing::nmse(narrow.logits[0][0], dense.logits[0][0]), 1e-8);
}

TEST(ModelGenerate, SavedAndLoadedWeightsReproduceOutputs) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "msa_model_test_generate_save";
  fs::remove_all(dir);
  save_weights(testing::tiny_weights(), dir.string());
  const Weights loaded = load_model(dir.string());
  fs::remove_all(dir);
  auto dev = testing::cpu_ref();
  const RunSpec s = long_spec();
  expect_same(testing::run_spec(*dev, testing::tiny_weights(), s), testing::run_spec(*dev, loaded, s));
}

TEST(ModelGenerate, BadRequestsAreErrors) {
  auto dev = testing::cpu_ref();
  Model m(*dev, testing::tiny_weights());
  const Config& c = m.config();
  EXPECT_THROW(Session(m, {}, {}, {}), Error);
  EXPECT_THROW(Session(m, {{}}, {}, {}), Error);
  EXPECT_THROW(Session(m, {{c.vocab_size}}, {}, {}), Error);
  // Vision rows that do not match the placeholders.
  hal::Device::Owned vis = encode_video_rows(m, testing::tiny_video(), 1);
  EXPECT_THROW(Session(m, {build_prompt(c, random_tokens(c, 5, 1), 3)}, vis.tensor, {}), Error);
}

// Every other backend compiled in and present: `msa run --check` (every step's logits
// and selections against cpu-ref, teacher-forced) passes on the tiny multimodal batch.
TEST(ModelGenerate, OtherBackendsMatchCpuRef) {
  int tested = 0;
  for (const auto& b : hal::list_backends()) {
    if (b.name == "cpu-ref" || !b.compiled || b.devices.empty()) continue;
    RunOptions o;
    o.backend = b.devices.front();
    o.prompt_tokens = 330;
    o.video_frames = 4;
    o.gen = 4;
    o.batch = 2;
    o.check = true;
    o.progress = false;
    std::ostringstream out;
    EXPECT_EQ(run_main(o, out), 0) << out.str();
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no backend other than cpu-ref has a device here";
}

}  // namespace
}  // namespace msa::model
