// The shared host side of rope and rope_3d (each in <op>.cpp; shaders/rotary.comp): the
// inverse frequencies are computed here in double exactly as the reference does and
// handed to the shader in a small temporary buffer (doubles when the device has
// shaderFloat64, else floats).
#pragma once
#include <cmath>
#include <vector>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "backends/vulkan/stream.h"
#include "ops/args.h"

namespace msa::vulkan {

// theta^(-2j/dim) for j < n, bound as the shader's binding 4.
inline void bind_inv_freq(Launch& l, hal::Stream& s, bool f64, float theta, int64_t n, int64_t dim) {
  std::vector<double> d(static_cast<size_t>(n > 0 ? n : 1), 0.0);
  for (int64_t j = 0; j < n; ++j)
    d[j] = std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(j) / static_cast<double>(dim));
  auto& vs = static_cast<VulkanStream&>(s);
  if (f64) {
    l.bind_raw(vs.temp_upload(d.data(), d.size() * sizeof(double)), d.size() * sizeof(double));
  } else {
    std::vector<float> f(d.begin(), d.end());
    l.bind_raw(vs.temp_upload(f.data(), f.size() * sizeof(float)), f.size() * sizeof(float));
  }
}

inline std::string supports_rotary(const hal::Tensor& x, const hal::Tensor& pos, const hal::Tensor& y) {
  const VulkanDevice& dev = device_of(x, "x");
  if (y.dtype != x.dtype) return "the Vulkan rope needs y of x's dtype";
  return check_bindable(dev, {&x, &pos, &y});
}

}  // namespace msa::vulkan
