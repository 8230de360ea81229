// dense_attention_backward (docs/training.md) over every visible block; the algorithm is
// in paged_attention_backward.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention_backward.h"

namespace msa::vulkan {

void dense_attention_backward(hal::Stream& s, const ops::DenseAttentionBackwardArgs& a) {
  paged_backward(s, a, hal::Tensor{}, 1, 0, false, hal::OpId::dense_attention_backward);
}

std::string supports_dense_attention_backward(const ops::DenseAttentionBackwardArgs& a) {
  return supports_paged_backward(a, hal::Tensor{}, 1, 0, false, "dense_attention_backward");
}

}  // namespace msa::vulkan
