// rope and rope_3d (shaders/rope.comp). The inverse frequencies are computed here in
// double exactly as the reference does and handed to the shader in a small temporary
// buffer (doubles when the device has shaderFloat64, else floats).
#include <cmath>
#include <vector>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "backends/vulkan/stream.h"

namespace msa::vulkan {
namespace {

// theta^(-2j/dim) for j < n, bound as the shader's binding 4.
void bind_inv_freq(Launch& l, hal::Stream& s, bool f64, float theta, int64_t n, int64_t dim) {
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

std::string supports_rotary(const hal::Tensor& x, const hal::Tensor& pos, const hal::Tensor& y) {
  const VulkanDevice& dev = device_of(x, "x");
  if (y.dtype != x.dtype) return "the Vulkan rope needs y of x's dtype";
  return check_bindable(dev, {&x, &pos, &y});
}

}  // namespace

void rope(hal::Stream& s, const ops::RopeArgs& a) {
  const char* name = "rope";
  const bool f64 = static_cast<VulkanStream&>(s).device().caps().float64;
  RopePC pc{};
  Launch l(s, "rope_" + tag(a.x.dtype) + (f64 ? "_f64" : ""), hal::OpId::rope);
  pc.off_x = l.bind(a.x, "x");
  pc.off_pos = l.bind(a.pos, "pos");
  pc.off_y = l.bind(a.y, "y");
  pc.T = u32(a.x.dim(0), name, "x");
  pc.H = u32(a.x.dim(1), name, "x");
  pc.D = u32(a.x.dim(2), name, "x");
  const int64_t rd = a.rotary_dim == 0 ? a.x.dim(2) : a.rotary_dim;
  pc.half_dim = u32(rd / 2, name, "rotary_dim");
  bind_inv_freq(l, s, f64, a.theta, rd / 2, rd);
  const uint64_t n = uint64_t{pc.T} * pc.H * (pc.D - pc.half_dim);
  l.run(pc, (n + 255) / 256);
}

std::string supports_rope(const ops::RopeArgs& a) { return supports_rotary(a.x, a.pos, a.y); }

void rope_3d(hal::Stream& s, const ops::Rope3dArgs& a) {
  const char* name = "rope_3d";
  const bool f64 = static_cast<VulkanStream&>(s).device().caps().float64;
  RopePC pc{};
  Launch l(s, "rope3d_" + tag(a.x.dtype) + (f64 ? "_f64" : ""), hal::OpId::rope_3d);
  pc.off_x = l.bind(a.x, "x");
  pc.off_pos = l.bind(a.pos, "pos");
  pc.off_y = l.bind(a.y, "y");
  pc.T = u32(a.x.dim(0), name, "x");
  pc.H = u32(a.x.dim(1), name, "x");
  pc.D = u32(a.x.dim(2), name, "x");
  const int64_t per_axis = 2 * (a.x.dim(2) / 6);
  pc.npair = u32(per_axis / 2, name, "x");
  pc.half_dim = 3 * pc.npair;
  bind_inv_freq(l, s, f64, a.theta, per_axis / 2, per_axis);
  const uint64_t n = uint64_t{pc.T} * pc.H * (pc.D - pc.half_dim);
  l.run(pc, (n + 255) / 256);
}

std::string supports_rope_3d(const ops::Rope3dArgs& a) { return supports_rotary(a.x, a.pos, a.y); }

}  // namespace msa::vulkan
