// The shared host side of the elementwise ops add, swiglu and gelu (each in <op>.cpp;
// one invocation per element, shaders/eltwise.comp).
#pragma once
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "ops/args.h"

namespace msa::vulkan {

inline void run_eltwise(hal::Stream& s, const char* kind, hal::OpId op, const hal::Tensor& a, const hal::Tensor& b,
                        const hal::Tensor& y) {
  EltwisePC pc{};
  Launch l(s, std::string(kind) + "_" + tag(y.dtype), op);
  pc.off_a = l.bind(a, "a");
  pc.off_b = l.bind(b, "b");
  pc.off_y = l.bind(y, "y");
  pc.n = u32(y.numel(), hal::op_name(op), "y");
  l.run(pc, (uint64_t{pc.n} + 255) / 256);
}

inline std::string supports_eltwise(std::initializer_list<const hal::Tensor*> ts, const hal::Tensor& y) {
  for (const hal::Tensor* t : ts)
    if (t->present() && t->dtype != y.dtype) return "the Vulkan elementwise ops need one dtype for all tensors";
  return check_bindable(device_of(y, "y"), ts);
}

}  // namespace msa::vulkan
