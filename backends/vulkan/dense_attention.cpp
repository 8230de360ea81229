// dense_attention: the GQA kernel over every visible block where the shape and device
// suit it (shaders/paged_attention.gqa.comp, merged by paged_attention.combine.comp; K/V
// past one binding by device address), else one workgroup per (query row, head[, key
// split]) (shaders/paged_attention.comp); see paged_attention.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention.h"

namespace msa::vulkan {

void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) {
  if (gqa_unsupported(a).empty()) {
    gqa_attention(s, a, hal::Tensor{}, 0, false, hal::OpId::dense_attention);
    return;
  }
  paged_attention(s, a, hal::Tensor{}, 1, 0, false, hal::OpId::dense_attention);
}

std::string supports_dense_attention(const ops::DenseAttentionArgs& a) {
  if (gqa_unsupported(a).empty() && gqa_by_address(a)) return supports_gqa_by_address(a, hal::Tensor{});
  return supports_paged(a, hal::Tensor{});
}

}  // namespace msa::vulkan
