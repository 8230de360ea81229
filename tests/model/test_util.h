// Shared helpers of the model tests: the tiny preset's weights, a small video, and one
// call that runs greedy generation and keeps every step's logits.
#pragma once
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "hal/registry.h"
#include "model/generate.h"
#include "model/video.h"
#include "model/weights.h"

namespace msa::model::testing {

// The tiny preset's weights (seed 0), made once.
inline const Weights& tiny_weights() {
  static const Weights w = init_weights(preset_config("tiny"), 0);
  return w;
}

// 4 frames of 56 x 56: 2 temporal patches of 4 x 4 patches -> 8 vision tokens.
inline const VisionInput& tiny_video() {
  static const VisionInput v = patchify(synthetic_video(4, 56, 56, 7), tiny_weights().config.vision);
  return v;
}

struct RunSpec {
  std::vector<std::vector<int32_t>> text;  // per sequence
  bool video = false;                      // prepend the tiny video's placeholders
  int max_chunk = 8192;
  int gen = 4;
  bool force_dense = false;
  bool poison = false;
  std::optional<hal::DType> dtype;
  std::optional<hal::DType> ki_dtype;  // indexer key cache (default: the session's)
};

// Prompts of a spec: vision placeholders (if any) then the text.
inline std::vector<std::vector<int32_t>> prompts_of(const Config& c, const RunSpec& s) {
  std::vector<std::vector<int32_t>> p;
  const int64_t nv = s.video ? vision_token_count(tiny_video(), c.vision) : 0;
  for (const auto& t : s.text) p.push_back(build_prompt(c, t, nv));
  return p;
}

// Greedy generation of `s` on `device` with weights `w`; logits and selection kept.
inline GenerateResult run_spec(hal::Device& device, const Weights& w, const RunSpec& s) {
  Model m(device, w, s.dtype);
  hal::Device::Owned vis;
  if (s.video) vis = encode_video_rows(m, tiny_video(), static_cast<int>(s.text.size()));
  SessionOptions o;
  o.max_chunk = s.max_chunk;
  o.decode_steps = s.gen - 1;
  o.keep_logits = true;
  o.collect_selection = !s.force_dense;
  o.force_dense = s.force_dense;
  o.poison_cache = s.poison;
  o.ki_dtype = s.ki_dtype;
  Session sess(m, prompts_of(w.config, s), vis.tensor, o);
  return generate(sess, s.gen);
}

// sum((a - ref)^2) / sum(ref^2); NaN anywhere gives +inf.
inline double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    if (std::isnan(d)) return INFINITY;
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0.0 ? num / den : num;
}

inline std::unique_ptr<hal::Device> cpu_ref() { return hal::create_device("cpu-ref"); }

}  // namespace msa::model::testing
