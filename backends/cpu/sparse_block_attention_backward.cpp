// sparse_block_attention_backward (docs/training.md): each token's selected blocks, run
// by the paged backward core (attention_backward.cpp).
#include "backends/cpu/backward_inputs.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/token_blocks.h"
#include "backends/cpu_ref/attended_sets.h"

namespace msa::cpu {

void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs& a) {
  const cpu_ref::Batch batch =
      cpu_ref::checked_sparse_batch("sparse_block_attention_backward", a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q,
                                    a.Qb, a.NQ, a.mode, a.block_idx);
  const bool shared = a.mode == ops::SelectionMode::shared;
  const PagedBackwardInputs c =
      paged_backward_inputs(a.dout, a.q, a.k_cache, a.v_cache, a.block_table, a.out, a.lse, a.scale,
                            TokenBlocks(batch, a.q.dim(0), &a.block_idx, shared, a.k_cache.dim(1), a.k_cache.dim(2)));
  run_paged_backward(c, a.dq, a.dk_cache, a.dv_cache);
}

}  // namespace msa::cpu
