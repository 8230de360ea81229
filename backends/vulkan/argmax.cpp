// argmax: one workgroup per row (shaders/argmax.comp).
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void argmax(hal::Stream& s, const ops::ArgmaxArgs& a) {
  const char* name = "argmax";
  ArgmaxPC pc{};
  Launch l(s, "argmax_" + tag(a.x.dtype), hal::OpId::argmax);
  pc.off_x = l.bind(a.x, "x");
  pc.off_idx = l.bind(a.idx, "idx");
  pc.M = u32(rows_of(a.x), name, "x");
  pc.N = u32(last_dim_of(a.x), name, "x");
  l.run(pc, pc.M);
}

std::string supports_argmax(const ops::ArgmaxArgs& a) { return check_bindable(device_of(a.x, "x"), {&a.x, &a.idx}); }

}  // namespace msa::vulkan
