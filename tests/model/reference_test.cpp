// The model (through the ops on cpu-ref, f32 activations) against the independent f64
// host implementation of reference_model.h: the vision encoder, and the logits of every
// position of a multimodal prompt long enough for the MSA layer to drop blocks.
#include <gtest/gtest.h>

#include "model/decoder.h"
#include "reference_model.h"
#include "test_util.h"

namespace msa::model {
namespace {

double nmse(const std::vector<float>& got, const reference::Mat& ref, size_t begin, size_t end) {
  double num = 0, den = 0;
  for (size_t i = begin; i < end; ++i) {
    const double d = got[i] - ref[i];
    num += std::isnan(d) ? INFINITY : d * d;
    den += ref[i] * ref[i];
  }
  return num / den;
}

TEST(ModelReference, VisionEncoderMatchesHostReference) {
  auto dev = testing::cpu_ref();
  const Weights& w = testing::tiny_weights();
  Model m(*dev, w, hal::DType::f32);
  const hal::Device::Owned vis = m.encode_video(testing::tiny_video());
  const std::vector<float> got = hal::to_host(*dev, vis.tensor).to_f32();
  const reference::Mat want = reference::vision_tokens(w, testing::tiny_video());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(nmse(got, want, 0, want.size()), 1e-10);
}

TEST(ModelReference, DecoderLogitsAtEveryPositionMatchHostReference) {
  auto dev = testing::cpu_ref();
  const Weights& w = testing::tiny_weights();
  const Config& c = w.config;
  Model m(*dev, w, hal::DType::f32);
  const hal::Device::Owned vis = encode_video_rows(m, testing::tiny_video(), 1);
  const int64_t nv = vis.tensor.dim(0);
  const std::vector<int32_t> prompt = build_prompt(c, random_tokens(c, 320, 5), nv);
  const int64_t T = static_cast<int64_t>(prompt.size());

  KvCache cache(*dev, c, hal::DType::f32, hal::DType::f32, KvCache::pages_for(T, c.sparse_block_size), true);
  DecoderOptions dopt;
  dopt.collect_selection = true;
  Decoder dec(c, m.weights(), cache, m.workspace(), m.runner(), dopt);
  StepInput in;
  in.seqs = {cache.add_sequence()};
  in.q_len = {static_cast<int32_t>(T)};
  in.tokens = prompt;
  in.vis = vis.tensor;
  for (int32_t t = 0; t < T; ++t) in.out_rows.push_back(t);
  const StepOutput out = dec.forward(in);
  const std::vector<float> got = hal::to_host(*dev, out.logits).to_f32();
  // The selection really is sparse at the end of the prompt.
  EXPECT_LT(out.selection.mean(), 0.95);

  // Reference embeddings: token rows, the first nv replaced by the reference vision tokens.
  const reference::Mat table = reference::get(w, "model.embed_tokens.weight");
  const reference::Mat vt = reference::vision_tokens(w, testing::tiny_video());
  const int64_t H = c.hidden_size, V = c.vocab_size;
  reference::Mat x0(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) x0[t * H + i] = t < nv ? vt[t * H + i] : table[prompt[t] * H + i];
  const reference::Mat want = reference::decoder_logits(w, x0);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(nmse(got, want, 0, want.size()), 1e-10);
  for (int64_t t = 0; t < T; ++t) {
    ASSERT_LT(nmse(got, want, t * V, (t + 1) * V), 1e-8) << "position " << t;
  }
}

}  // namespace
}  // namespace msa::model
