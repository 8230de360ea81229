// The shared host side of rms_norm and layer_norm (each in <op>.cpp; one workgroup per
// row, shaders/norm.comp).
#pragma once
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "ops/args.h"

namespace msa::vulkan {

inline void run_norm(hal::Stream& s, const char* kind, hal::OpId op, const hal::Tensor& x, const hal::Tensor& w,
                     const hal::Tensor& b, const hal::Tensor& y, float eps, uint32_t flag) {
  const char* name = hal::op_name(op);
  NormPC pc{};
  Launch l(s, std::string(kind) + "_" + tag(x.dtype) + "_" + tag(w.dtype), op);
  pc.off_x = l.bind(x, "x");
  pc.off_w = l.bind(w, "w");
  pc.off_b = l.bind(b, "b");
  pc.off_y = l.bind(y, "y");
  pc.M = u32(rows_of(x), name, "x");
  pc.N = u32(last_dim_of(x), name, "x");
  pc.eps = eps;
  pc.flag = flag;
  l.run(pc, pc.M);
}

inline std::string supports_norm(const hal::Tensor& x, const hal::Tensor& w, const hal::Tensor& b,
                                 const hal::Tensor& y) {
  const VulkanDevice& dev = device_of(x, "x");
  if (y.dtype != x.dtype) return "the Vulkan norms need y of x's dtype";
  if (w.dtype != hal::DType::f32 && w.dtype != x.dtype) return "w must be f32 or x's dtype";
  if (b.present() && b.dtype != w.dtype) return "the Vulkan layer_norm needs b of w's dtype";
  return check_bindable(dev, {&x, &w, &b, &y});
}

}  // namespace msa::vulkan
