// dense_attention: one plan group per tile of tokens of a sequence and KV head, over
// all of its blocks (attention_plan.h; run by paged_attention.cpp).
#include <algorithm>
#include <cstdint>

#include "backends/cpu/attention_plan.h"
#include "backends/cpu/kernels.h"

namespace msa::cpu {

void dense_attention(hal::Stream&, const ops::DenseAttentionArgs& a) {
  const char* op = "dense_attention";
  PagedAttnPlan p;
  init_plan(p, op, a.q, a.k_cache, a.v_cache, a.block_table, a.kv_len, a.cu_q, 1, a.scale, a.out, a.lse);
  const int64_t tpg = tokens_per_group(p.G);
  for (size_t b = 0; b < p.batch.seqs.size(); ++b) {
    const SeqInfo& s = p.batch.seqs[b];
    for (int64_t h = 0; h < p.Hkv; ++h)
      for (int64_t t0 = s.q_begin; t0 < s.q_begin + s.q_len; t0 += tpg) {
        const int64_t t1 = std::min(t0 + tpg, s.q_begin + s.q_len);
        const int64_t last_pos = s.pos0 + (t1 - 1 - s.q_begin);
        add_group(p, static_cast<int64_t>(b), h, t0, t1, nullptr, last_pos / p.Bs + 1);
      }
  }
  finish_plan(p, kDenseChunkBlocks);
  run_paged_plan(p);
}

}  // namespace msa::cpu
