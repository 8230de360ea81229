// rope_3d: rotary embedding over (t, h, w) positions (shaders/rotary.comp, ROPE3D=1); see
// rotary.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/rotary.h"

namespace msa::vulkan {

void rope_3d(hal::Stream& s, const ops::Rope3dArgs& a) {
  const char* name = "rope_3d";
  const bool f64 = static_cast<VulkanStream&>(s).device().caps().float64;
  RopePC pc{};
  Launch l(s, "rope_3d_" + tag(a.x.dtype) + (f64 ? "_f64" : ""), hal::OpId::rope_3d);
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
