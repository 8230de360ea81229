// dense_attention: softmax attention over every valid, causal cached token
// (docs/spec.md, "Op: dense_attention"). Scalar, one thread, double accumulation.
#include <string>

#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {

void dense_attention(hal::Stream&, const ops::DenseAttentionArgs& a) {
  const char* op = "dense_attention";
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1), Bs = a.k_cache.dim(2);
  MSA_CHECK_ARG(Hkv > 0 && Hq % Hkv == 0, op, "k_cache",
                "Hkv = " + std::to_string(Hkv) + " must divide Hq = " + std::to_string(Hq));
  const int64_t G = Hq / Hkv;
  const Batch batch = make_batch(op, a.cu_q, a.kv_len, T, Bs, a.block_table.dim(1), 1);
  check_block_table(op, batch, a.block_table, P);
  const double scale = resolve_scale(a.scale, D);

  KvRows kv;
  kv.D = D;
  AttendScratch ws;
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const Sequence& s = batch.seqs[b];
    if (s.q_len == 0) continue;
    for (int64_t g = 0; g < Hkv; ++g) {
      // The whole valid sequence of KV head g; each query masks it causally.
      kv.clear();
      for (int64_t c = 0; c < s.n_blocks; ++c)
        kv.append_block(a.k_cache, a.v_cache, page_of(a.block_table, static_cast<int64_t>(b), c),
                        g, c, s.kv_len);
      for (int64_t i = 0; i < s.q_len; ++i)
        attend_heads(a.q, s.q_begin + i, g * G, G, kv, s.pos0 + i, scale, a.out, a.lse, ws);
    }
  }
}

}  // namespace msa::cpu_ref
