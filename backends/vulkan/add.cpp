// add: y = a + b, one invocation per element (shaders/eltwise.comp, OP=0).
#include "backends/vulkan/eltwise.h"
#include "backends/vulkan/kernels.h"

namespace msa::vulkan {

void add(hal::Stream& s, const ops::AddArgs& a) { run_eltwise(s, "add", hal::OpId::add, a.a, a.b, a.y); }

std::string supports_add(const ops::AddArgs& a) { return supports_eltwise({&a.a, &a.b, &a.y}, a.y); }

}  // namespace msa::vulkan
