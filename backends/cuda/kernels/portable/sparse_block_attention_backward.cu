// sparse_block_attention_backward: dq, dk_cache, dv_cache of sparse_block_attention over
// the blocks block_idx selects (attention_backward.cuh). The device checks cu_q, kv_len,
// NQ and the pages of the selected blocks as the forward kernels do.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::MSA_GPU_NS {

void sparse_block_attention_backward(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) {
  paged_backward(gpu_stream(s), a, PagedSelection{&a.block_idx, a.Qb, a.NQ},
                 hal::OpId::sparse_block_attention_backward);
}

}  // namespace msa::MSA_GPU_NS
