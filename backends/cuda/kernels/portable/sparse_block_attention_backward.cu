// sparse_block_attention_backward: dq, dk_cache, dv_cache of sparse_block_attention over
// the blocks block_idx selects (attention_backward.cuh). The device checks cu_q, kv_len,
// NQ and the pages of the selected blocks as the forward kernels do.
#include "backends/cuda/kernels/portable/attention_backward.cuh"
#include "backends/cuda/kernels/portable/entries.h"

namespace msa::MSA_GPU_NS {

void sparse_block_attention_backward_portable(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) {
  auto& st = gpu_stream(s);
  paged_backward_portable(st, bind_backward(st, a));
}

}  // namespace msa::MSA_GPU_NS
