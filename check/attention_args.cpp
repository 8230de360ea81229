#include "check/attention_args.h"

#include "ops/paged_batch.h"

namespace msa::cases {
namespace {

// The paged batch from the slots "block_table", "kv_len" and "cu_q".
template <typename Args>
void bind_batch(Args& a, const Bound& t) {
  ops::set_batch(a, {t("block_table"), t("kv_len"), t("cu_q")});
}

// The query blocks and selection mode of the case (indexer_score and sparse attention).
template <typename Args>
void set_query_blocks(Args& a, const AttnParams& p, const Batch& b) {
  a.Qb = p.Qb;
  a.NQ = b.NQ();
  a.mode = p.mode;
}

// q and the K/V caches from their slots, then the batch.
template <typename Args>
void bind_paged(Args& a, const Bound& t) {
  a.q = t("q");
  a.k_cache = t("k_cache");
  a.v_cache = t("v_cache");
  bind_batch(a, t);
}

// What a paged backward takes from its forward f: the inputs, the batch, scale and f's
// out/lse; dout from the slot "dout" and the gradients from the slots dq, dk, dv.
template <typename Backward, typename Forward>
Backward paged_backward_args(const Forward& f, const Bound& t, const std::string& dq, const std::string& dk,
                             const std::string& dv) {
  Backward a;
  a.dout = t("dout");
  a.q = f.q, a.k_cache = f.k_cache, a.v_cache = f.v_cache;
  ops::set_batch(a, ops::batch_of(f));
  a.scale = f.scale, a.out = f.out, a.lse = f.lse;
  a.dq = t(dq), a.dk_cache = t(dk), a.dv_cache = t(dv);
  return a;
}

}  // namespace

ops::IndexerScoreArgs indexer_args(const AttnParams& p, const Batch& b, const Bound& t) {
  ops::IndexerScoreArgs a;
  a.qi = t("qi");
  a.ki_cache = t("ki_cache");
  a.ki_scale = t("ki_scale");
  bind_batch(a, t);
  set_query_blocks(a, p, b);
  a.scale = p.scale;
  a.pool = p.pool;
  a.block_score = t("block_score");
  return a;
}

ops::BlockTopkArgs topk_args(const AttnParams& p, const Batch& b, const Bound& t) {
  ops::BlockTopkArgs a;
  a.block_score = t("block_score");
  a.kv_len = t("kv_len");
  a.cu_q = t("cu_q");
  a.Qb = p.Qb;
  a.NQ = b.NQ();
  a.Bs = p.Bs;
  a.k = p.k;
  a.n_sink = p.n_sink;
  a.n_local = p.n_local;
  a.block_idx = t("block_idx");
  a.block_cnt = t("block_cnt");
  return a;
}

ops::SparseAttentionArgs sparse_args(const AttnParams& p, const Batch& b, const Bound& t) {
  ops::SparseAttentionArgs a;
  bind_paged(a, t);
  set_query_blocks(a, p, b);
  a.block_idx = t("block_idx");
  a.scale = p.scale;
  a.out = t("out");
  a.lse = t("lse");
  return a;
}

ops::DenseAttentionArgs dense_args(const AttnParams& p, const Bound& t, const std::string& out,
                                   const std::string& lse) {
  ops::DenseAttentionArgs a;
  bind_paged(a, t);
  a.scale = p.scale;
  a.out = t(out);
  a.lse = t(lse);
  return a;
}

ops::SparseAttentionBackwardArgs sparse_backward_args(const ops::SparseAttentionArgs& f, const Bound& t,
                                                      const std::string& dq, const std::string& dk,
                                                      const std::string& dv) {
  auto a = paged_backward_args<ops::SparseAttentionBackwardArgs>(f, t, dq, dk, dv);
  a.Qb = f.Qb, a.NQ = f.NQ, a.mode = f.mode, a.block_idx = f.block_idx;
  return a;
}

ops::DenseAttentionBackwardArgs dense_backward_args(const ops::DenseAttentionArgs& f, const Bound& t,
                                                    const std::string& dq, const std::string& dk,
                                                    const std::string& dv) {
  return paged_backward_args<ops::DenseAttentionBackwardArgs>(f, t, dq, dk, dv);
}

}  // namespace msa::cases
