#include "check/attention_args.h"

namespace msa::cases {

ops::IndexerScoreArgs indexer_args(const AttnParams& p, const Batch& b, const Bound& t) {
  ops::IndexerScoreArgs a;
  a.qi = t("qi");
  a.ki_cache = t("ki_cache");
  a.ki_scale = t("ki_scale");
  a.block_table = t("block_table");
  a.kv_len = t("kv_len");
  a.cu_q = t("cu_q");
  a.Qb = p.Qb;
  a.NQ = b.NQ();
  a.mode = p.mode;
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
  a.q = t("q");
  a.k_cache = t("k_cache");
  a.v_cache = t("v_cache");
  a.block_table = t("block_table");
  a.kv_len = t("kv_len");
  a.cu_q = t("cu_q");
  a.Qb = p.Qb;
  a.NQ = b.NQ();
  a.mode = p.mode;
  a.block_idx = t("block_idx");
  a.scale = p.scale;
  a.out = t("out");
  a.lse = t("lse");
  return a;
}

ops::DenseAttentionArgs dense_args(const AttnParams& p, const Bound& t, const std::string& out,
                                   const std::string& lse) {
  ops::DenseAttentionArgs a;
  a.q = t("q");
  a.k_cache = t("k_cache");
  a.v_cache = t("v_cache");
  a.block_table = t("block_table");
  a.kv_len = t("kv_len");
  a.cu_q = t("cu_q");
  a.scale = p.scale;
  a.out = t(out);
  a.lse = t(lse);
  return a;
}

ops::SparseAttentionBackwardArgs sparse_backward_args(const ops::SparseAttentionArgs& f, const Bound& t,
                                                      const std::string& dq, const std::string& dk,
                                                      const std::string& dv) {
  ops::SparseAttentionBackwardArgs a;
  a.dout = t("dout");
  a.q = f.q, a.k_cache = f.k_cache, a.v_cache = f.v_cache;
  a.block_table = f.block_table, a.kv_len = f.kv_len, a.cu_q = f.cu_q;
  a.Qb = f.Qb, a.NQ = f.NQ, a.mode = f.mode, a.block_idx = f.block_idx, a.scale = f.scale;
  a.out = f.out, a.lse = f.lse;
  a.dq = t(dq), a.dk_cache = t(dk), a.dv_cache = t(dv);
  return a;
}

ops::DenseAttentionBackwardArgs dense_backward_args(const ops::DenseAttentionArgs& f, const Bound& t,
                                                    const std::string& dq, const std::string& dk,
                                                    const std::string& dv) {
  ops::DenseAttentionBackwardArgs a;
  a.dout = t("dout");
  a.q = f.q, a.k_cache = f.k_cache, a.v_cache = f.v_cache;
  a.block_table = f.block_table, a.kv_len = f.kv_len, a.cu_q = f.cu_q;
  a.scale = f.scale, a.out = f.out, a.lse = f.lse;
  a.dq = t(dq), a.dk_cache = t(dk), a.dv_cache = t(dv);
  return a;
}

}  // namespace msa::cases
