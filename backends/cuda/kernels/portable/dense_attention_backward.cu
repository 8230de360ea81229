// dense_attention_backward: dq, dk_cache, dv_cache of dense_attention over every valid,
// causal cached token (attention_backward.cuh). The device checks cu_q, kv_len and the
// pages as the forward kernels do.
#include "backends/cuda/kernels/portable/attention_backward.cuh"
#include "backends/cuda/kernels/portable/entries.h"

namespace msa::MSA_GPU_NS {

void dense_attention_backward_portable(hal::Stream& s, const ops::DenseAttentionBackwardArgs& a) {
  auto& st = gpu_stream(s);
  paged_backward_portable(st, bind_backward(st, a));
}

}  // namespace msa::MSA_GPU_NS
