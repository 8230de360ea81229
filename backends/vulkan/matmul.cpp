// matmul: y = x W^T (+ bias), 64x64 tiles in f32 (shaders/matmul.comp).
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void matmul(hal::Stream& s, const ops::MatmulArgs& a) {
  const char* name = "matmul";
  MatmulPC pc{};
  Launch l(s, "matmul_" + tag(a.x.dtype), hal::OpId::matmul);
  pc.off_x = l.bind(a.x, "x");
  pc.off_w = l.bind(a.w, "w");
  pc.off_b = l.bind(a.bias, "bias");
  pc.off_y = l.bind(a.y, "y");
  pc.M = u32(rows_of(a.x), name, "x");
  pc.N = u32(a.w.dim(0), name, "w");
  pc.K = u32(a.w.dim(1), name, "w");
  pc.has_bias = a.bias.present() ? 1 : 0;
  pc.tiles_n = (pc.N + 63) / 64;
  l.run(pc, uint64_t{(pc.M + 63) / 64} * pc.tiles_n);
}

std::string supports_matmul(const ops::MatmulArgs& a) {
  const VulkanDevice& dev = device_of(a.x, "x");
  if (a.w.dtype != a.x.dtype || a.y.dtype != a.x.dtype || (a.bias.present() && a.bias.dtype != a.x.dtype))
    return "the Vulkan matmul needs x, w, bias and y of one dtype";
  return check_bindable(dev, {&a.x, &a.w, &a.bias, &a.y});
}

}  // namespace msa::vulkan
