// rope: rotary embedding by position (shaders/rotary.comp, ROPE3D=0); see rotary.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/rotary.h"

namespace msa::vulkan {

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

}  // namespace msa::vulkan
