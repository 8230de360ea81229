// sparse_block_attention: the GQA kernel for decode where the device allows it
// (shaders/paged_attention.gqa.comp, merged by paged_attention.combine.comp), else one workgroup per (query
// row, head[, key split]) over the selected blocks (shaders/paged_attention.comp); see
// paged_attention.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention.h"

namespace msa::vulkan {

void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  const bool shared_mode = a.mode == ops::SelectionMode::shared;
  if (gqa_unsupported(a).empty()) {
    gqa_attention(s, a, a.block_idx, a.NQ, shared_mode, hal::OpId::sparse_block_attention);
    return;
  }
  paged_attention(s, a, a.block_idx, a.Qb, a.NQ, shared_mode, hal::OpId::sparse_block_attention);
}

std::string supports_sparse_block_attention(const ops::SparseAttentionArgs& a) {
  if (gqa_unsupported(a).empty() && gqa_by_address(a)) return supports_gqa_by_address(a, a.block_idx);
  return supports_paged(a, a.block_idx);
}

}  // namespace msa::vulkan
