// dense_attention: one workgroup per (query row, head[, key split]) over every visible
// block (shaders/paged_attention.comp, paged_attention.combine.comp); see paged_attention.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention.h"

namespace msa::vulkan {

void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) {
  paged_attention(s, a, hal::Tensor{}, 1, 0, false, hal::OpId::dense_attention);
}

std::string supports_dense_attention(const ops::DenseAttentionArgs& a) { return supports_paged(a, hal::Tensor{}); }

}  // namespace msa::vulkan
