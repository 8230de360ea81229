// dense_attention_backward (docs/training.md): every visible block of each token, run by
// the paged backward core (attention_backward.cpp).
#include "backends/cpu/backward_inputs.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/token_blocks.h"
#include "backends/cpu_ref/attended_sets.h"

namespace msa::cpu {

void dense_attention_backward(hal::Stream&, const ops::DenseAttentionBackwardArgs& a) {
  const cpu_ref::Batch batch =
      cpu_ref::checked_dense_batch("dense_attention_backward", a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q);
  const PagedBackwardInputs c =
      paged_backward_inputs(a.dout, a.q, a.k_cache, a.v_cache, a.block_table, a.out, a.lse, a.scale,
                            TokenBlocks(batch, a.q.dim(0), nullptr, false, a.k_cache.dim(1), a.k_cache.dim(2)));
  run_paged_backward(c, a.dq, a.dk_cache, a.dv_cache);
}

}  // namespace msa::cpu
