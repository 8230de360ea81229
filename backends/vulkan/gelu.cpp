// gelu: one invocation per element (shaders/eltwise.comp, OP=2).
#include "backends/vulkan/eltwise.h"
#include "backends/vulkan/kernels.h"

namespace msa::vulkan {

void gelu(hal::Stream& s, const ops::GeluArgs& a) { run_eltwise(s, "gelu", hal::OpId::gelu, a.x, hal::Tensor{}, a.y); }

std::string supports_gelu(const ops::GeluArgs& a) { return supports_eltwise({&a.x, &a.y}, a.y); }

}  // namespace msa::vulkan
