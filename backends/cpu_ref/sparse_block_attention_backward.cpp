// sparse_block_attention_backward: the gradient of sparse_block_attention
// (docs/training.md) to q, k_cache and v_cache over exactly the forward's attended sets.
// Scalar, one thread, double accumulation in a fixed order.
#include <vector>

#include "backends/cpu_ref/attended_sets.h"
#include "backends/cpu_ref/attention_backward.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {

void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs& a) {
  const Batch batch = checked_sparse_batch("sparse_block_attention_backward", a.q, a.k_cache, a.block_table, a.kv_len,
                                           a.cu_q, a.Qb, a.NQ, a.mode, a.block_idx);
  const int64_t G = a.q.dim(1) / a.k_cache.dim(1);
  const double scale = resolve_scale(a.scale, a.q.dim(2));
  AttentionGrads grads(a.q.numel(), a.k_cache.numel());
  const BackwardRows rows{a.dout, a.q, a.out, a.lse};
  std::vector<double> scratch;
  for_each_sparse_set(batch, a.k_cache, a.v_cache, a.block_table, a.block_idx, a.mode,
                      [&](const KvRows& kv, int64_t t, int64_t g, int64_t limit) {
                        backward_heads(rows, t, g * G, G, kv, limit, scale, grads, scratch);
                      });
  grads.store(a.dq, a.dk_cache, a.dv_cache);
}

}  // namespace msa::cpu_ref
