// sparse_block_attention: the GQA kernel for decode where the device allows it
// (shaders/paged_attention.gqa.comp, merged by paged_attention.combine.comp), else one workgroup per (query
// row, head[, key split]) over the selected blocks (shaders/paged_attention.comp); see
// paged_attention.h.
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention.h"

namespace msa::vulkan {

void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  if (gqa_unsupported(a).empty()) {
    sparse_gqa(s, a);
    return;
  }
  paged_attention(s, a, a.block_idx, a.Qb, a.NQ, a.mode == ops::SelectionMode::shared,
                  hal::OpId::sparse_block_attention);
}

std::string supports_sparse_block_attention(const ops::SparseAttentionArgs& a) {
  if (gqa_unsupported(a).empty() && gqa_by_address(a)) {
    const VulkanDevice& dev = device_of(a.q, "q");
    if (std::string why = check_head_dim(a.q.dim(2)); !why.empty()) return why;
    if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "T * Hq >= 2^32";
    for (const hal::Tensor* kv : {&a.k_cache, &a.v_cache})
      if (std::string why = check_addressable(dev, *kv, 16); !why.empty()) return why;
    return check_bindable(dev, {&a.q, &a.block_table, &a.kv_len, &a.cu_q, &a.block_idx, &a.out, &a.lse});
  }
  return supports_paged(a, a.block_idx);
}

}  // namespace msa::vulkan
