// dense_attention_backward: dq, dk_cache, dv_cache of dense_attention over every valid,
// causal cached token (attention_backward.cuh). The device checks cu_q, kv_len and the
// pages as the forward kernels do.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::MSA_GPU_NS {

void dense_attention_backward(hal::Stream& s, const ops::DenseAttentionBackwardArgs& a) {
  paged_backward(gpu_stream(s), a, PagedSelection{}, hal::OpId::dense_attention_backward);
}

}  // namespace msa::MSA_GPU_NS
