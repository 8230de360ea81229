// swiglu: y = silu(gate) * up, one invocation per element (shaders/eltwise.comp, OP=1).
#include "backends/vulkan/eltwise.h"
#include "backends/vulkan/kernels.h"

namespace msa::vulkan {

void swiglu(hal::Stream& s, const ops::SwigluArgs& a) {
  run_eltwise(s, "swiglu", hal::OpId::swiglu, a.gate, a.up, a.y);
}

std::string supports_swiglu(const ops::SwigluArgs& a) { return supports_eltwise({&a.gate, &a.up, &a.y}, a.y); }

}  // namespace msa::vulkan
