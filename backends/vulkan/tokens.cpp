// Token-level ops: embedding (one invocation per output element), scatter_visual (one
// workgroup per token row) and argmax (one workgroup per row): shaders/embedding.comp,
// shaders/scatter_visual.comp, shaders/argmax.comp.
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void embedding(hal::Stream& s, const ops::EmbeddingArgs& a) {
  const char* name = "embedding";
  EmbeddingPC pc{};
  Launch l(s, "embedding_" + tag(a.table.dtype) + "_" + tag(a.y.dtype), hal::OpId::embedding);
  pc.off_table = l.bind(a.table, "table");
  pc.off_ids = l.bind(a.ids, "ids");
  pc.off_y = l.bind(a.y, "y");
  pc.V = u32(a.table.dim(0), name, "table");
  pc.H = u32(a.table.dim(1), name, "table");
  pc.T = u32(a.ids.numel(), name, "ids");
  l.run(pc, (uint64_t{pc.T} * pc.H + 255) / 256);
}

std::string supports_embedding(const ops::EmbeddingArgs& a) {
  if (!hal::is_activation_dtype(a.table.dtype) || !hal::is_activation_dtype(a.y.dtype))
    return "the Vulkan embedding needs f32, bf16 or f16 table and y";
  return check_bindable(device_of(a.table, "table"), {&a.table, &a.ids, &a.y});
}

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
