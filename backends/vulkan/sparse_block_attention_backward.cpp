// sparse_block_attention_backward (docs/training.md) over the selected blocks; the
// algorithm is in paged_attention_backward.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention_backward.h"

namespace msa::vulkan {

void sparse_block_attention_backward(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) {
  paged_backward(s, a, a.block_idx, a.Qb, a.NQ, a.mode == ops::SelectionMode::shared,
                 hal::OpId::sparse_block_attention_backward);
}

std::string supports_sparse_block_attention_backward(const ops::SparseAttentionBackwardArgs& a) {
  return supports_paged_backward(a, a.block_idx, a.Qb, a.NQ, a.mode == ops::SelectionMode::shared,
                                 "sparse_block_attention_backward");
}

}  // namespace msa::vulkan
