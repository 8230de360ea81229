// scatter_visual: one workgroup per token row (shaders/scatter_visual.comp).
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void scatter_visual(hal::Stream& s, const ops::ScatterVisualArgs& a) {
  const char* name = "scatter_visual";
  ScatterVisualPC pc{};
  Launch l(s, "scatter_visual_" + tag(a.vis.dtype) + "_" + tag(a.x.dtype), hal::OpId::scatter_visual);
  pc.off_tokens = l.bind(a.tokens, "tokens");
  pc.off_vis = l.bind(a.vis, "vis");
  pc.off_x = l.bind(a.x, "x");
  pc.T = u32(a.tokens.numel(), name, "tokens");
  pc.Nv = u32(a.vis.dim(0), name, "vis");
  pc.H = u32(last_dim_of(a.x), name, "x");
  pc.placeholder = a.placeholder;
  // Workgroup 0 also checks the placeholder count, so launch at least one.
  l.run(pc, pc.T > 0 ? pc.T : 1);
}

std::string supports_scatter_visual(const ops::ScatterVisualArgs& a) {
  if (!hal::is_activation_dtype(a.vis.dtype) || !hal::is_activation_dtype(a.x.dtype))
    return "the Vulkan scatter_visual needs f32, bf16 or f16 vis and x";
  return check_bindable(device_of(a.x, "x"), {&a.tokens, &a.vis, &a.x});
}

}  // namespace msa::vulkan
