// add, swiglu and gelu: one invocation per element (shaders/eltwise.comp).
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {
namespace {

void run_eltwise(hal::Stream& s, const char* kind, hal::OpId op, const hal::Tensor& a, const hal::Tensor& b,
                 const hal::Tensor& y) {
  EltwisePC pc{};
  Launch l(s, std::string(kind) + "_" + tag(y.dtype), op);
  pc.off_a = l.bind(a, "a");
  pc.off_b = l.bind(b, "b");
  pc.off_y = l.bind(y, "y");
  pc.n = u32(y.numel(), hal::op_name(op), "y");
  l.run(pc, (uint64_t{pc.n} + 255) / 256);
}

std::string supports_eltwise(std::initializer_list<const hal::Tensor*> ts, const hal::Tensor& y) {
  for (const hal::Tensor* t : ts)
    if (t->present() && t->dtype != y.dtype) return "the Vulkan elementwise ops need one dtype for all tensors";
  return check_bindable(device_of(y, "y"), ts);
}

}  // namespace

void add(hal::Stream& s, const ops::AddArgs& a) { run_eltwise(s, "add", hal::OpId::add, a.a, a.b, a.y); }
std::string supports_add(const ops::AddArgs& a) { return supports_eltwise({&a.a, &a.b, &a.y}, a.y); }

void swiglu(hal::Stream& s, const ops::SwigluArgs& a) {
  run_eltwise(s, "swiglu", hal::OpId::swiglu, a.gate, a.up, a.y);
}
std::string supports_swiglu(const ops::SwigluArgs& a) { return supports_eltwise({&a.gate, &a.up, &a.y}, a.y); }

void gelu(hal::Stream& s, const ops::GeluArgs& a) { run_eltwise(s, "gelu", hal::OpId::gelu, a.x, hal::Tensor{}, a.y); }
std::string supports_gelu(const ops::GeluArgs& a) { return supports_eltwise({&a.x, &a.y}, a.y); }

}  // namespace msa::vulkan
