// Seeded random weights for the presets (and any config): portable bits, independent of
// the standard library (splitmix64, uniform values) and of the order tensors are made in.
#include <cmath>
#include <string>

#include "model/weights.h"

namespace msa::model {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Uniform values in [center - half, center + half).
void fill_uniform(hal::HostTensor& t, uint64_t state, float center, float half) {
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
    t.set(static_cast<size_t>(i), center + half * static_cast<float>(2.0 * u - 1.0));
  }
}

}  // namespace

Weights init_weights(const Config& c, uint64_t seed) {
  validate(c);
  Weights w;
  w.config = c;
  const float sqrt3 = std::sqrt(3.0f);
  for (const auto& spec : weight_specs(c)) {
    hal::HostTensor t(c.torch_dtype, spec.shape);
    const uint64_t state = hash_name(spec.name, seed);
    const std::string& n = spec.name;
    const bool visual = n.rfind("visual.", 0) == 0;
    if (spec.shape.size() == 2 && n != "model.embed_tokens.weight") {
      // Linear layers: variance 1 / fan_in.
      fill_uniform(t, state, 0.0f, sqrt3 / std::sqrt(static_cast<float>(spec.shape[1])));
    } else if (n == "model.embed_tokens.weight") {
      fill_uniform(t, state, 0.0f, sqrt3);
    } else if (visual && n.ends_with(".bias")) {
      fill_uniform(t, state, 0.0f, 0.02f);
    } else if (visual) {
      fill_uniform(t, state, 1.0f, 0.1f);  // LayerNorm scale
    } else {
      fill_uniform(t, state, 0.0f, 0.1f);  // gemma RMSNorm: scale is 1 + w
    }
    w.tensors.emplace(spec.name, std::move(t));
  }
  return w;
}

}  // namespace msa::model
