// embedding: one invocation per output element (shaders/embedding.comp).
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

}  // namespace msa::vulkan
