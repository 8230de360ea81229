// rms_norm and layer_norm: one workgroup per row (shaders/norm.comp).
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {
namespace {

void run_norm(hal::Stream& s, const char* kind, hal::OpId op, const hal::Tensor& x, const hal::Tensor& w,
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

std::string supports_norm(const hal::Tensor& x, const hal::Tensor& w, const hal::Tensor& b, const hal::Tensor& y) {
  const VulkanDevice& dev = device_of(x, "x");
  if (y.dtype != x.dtype) return "the Vulkan norms need y of x's dtype";
  if (w.dtype != hal::DType::f32 && w.dtype != x.dtype) return "w must be f32 or x's dtype";
  if (b.present() && b.dtype != w.dtype) return "the Vulkan layer_norm needs b of w's dtype";
  return check_bindable(dev, {&x, &w, &b, &y});
}

}  // namespace

void rms_norm(hal::Stream& s, const ops::RmsNormArgs& a) {
  run_norm(s, "rms_norm", hal::OpId::rms_norm, a.x, a.w, hal::Tensor{}, a.y, a.eps,
           a.kind == ops::NormKind::gemma ? 1 : 0);
}

std::string supports_rms_norm(const ops::RmsNormArgs& a) { return supports_norm(a.x, a.w, hal::Tensor{}, a.y); }

void layer_norm(hal::Stream& s, const ops::LayerNormArgs& a) {
  run_norm(s, "layer_norm", hal::OpId::layer_norm, a.x, a.w, a.b, a.y, a.eps, a.b.present() ? 1 : 0);
}

std::string supports_layer_norm(const ops::LayerNormArgs& a) { return supports_norm(a.x, a.w, a.b, a.y); }

}  // namespace msa::vulkan
