// sparse_block_attention: softmax attention over the causal, valid tokens of the KV blocks
// selected per query block and selection head (docs/spec.md, "Op: sparse_block_attention").
// Scalar, one thread, double accumulation.
#include "backends/cpu_ref/attended_sets.h"
#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {

void sparse_block_attention(hal::Stream&, const ops::SparseAttentionArgs& a) {
  const Batch batch = checked_sparse_batch("sparse_block_attention", a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q,
                                           a.Qb, a.NQ, a.mode, a.block_idx);
  const int64_t G = a.q.dim(1) / a.k_cache.dim(1);
  const double scale = resolve_scale(a.scale, a.q.dim(2));
  AttendScratch ws;
  for_each_sparse_set(batch, a.k_cache, a.v_cache, a.block_table, a.block_idx, a.mode,
                      [&](const KvRows& kv, int64_t t, int64_t g, int64_t limit) {
                        attend_heads(a.q, t, g * G, G, kv, limit, scale, a.out, a.lse, ws);
                      });
}

}  // namespace msa::cpu_ref
