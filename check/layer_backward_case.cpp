// msa_layer_backward: the MSA layer's forward and backward for training (indexer_score ->
// block_topk, then sparse_block_attention, its backward and indexer_kl(stage sparse) over a
// synthetic selection), against dense_attention + dense_attention_backward on the same
// inputs as the baseline: the msa-bench form of `msa layer --backward`.
#include <mutex>
#include <vector>

#include "check/attention_args.h"
#include "check/attn_common.h"
#include "check/training_cases.h"
#include "ops/ops.h"

namespace msa::cases {
namespace {

class MsaLayerBackwardCase : public Case {
 public:
  MsaLayerBackwardCase(const AttnParams& p, SyntheticSelection kind)
      : p_(p), batch_(p.q_len, p.kv_len, p.Qb), kind_(kind) {}
  hal::OpId op() const override { return hal::OpId::sparse_block_attention_backward; }
  std::string name() const override { return "msa_layer_backward"; }
  std::string vars() const override {
    return attn_vars(p_, VarsKind::layer) + " select=" + synthetic_selection_name(kind_);
  }
  // bench_training.py's counts (docs/training.md, "Benchmarks"): the indexer over every
  // causal token, sparse forward + backward 3.5x the forward's 4*(Hq/Hs)*D per key,
  // indexer_kl 2*(Hq/Hs)*D + 6*Di per key.
  double flops() const override {
    const double keys = keys_attended(), group = static_cast<double>(p_.Hq) / p_.Hs();
    return 2.0 * p_.Hs() * p_.Di * dense_pairs(batch_) + 3.5 * 4.0 * group * p_.D * keys +
           (2.0 * group * p_.D + 6.0 * p_.Di) * keys;
  }
  // An estimate: the inputs once per op that reads them (K and V whole: the selections
  // cover most blocks of a training sequence), the outputs and f32 gradients once.
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype)), T = static_cast<double>(batch_.T());
    const double kv = detail::valid_token_bytes(batch_, 2.0 * p_.Hkv * p_.D * es);
    const double ki = detail::valid_token_bytes(batch_, detail::indexer_key_bytes(p_));
    const double qrow = T * p_.Hq * p_.D, irow = T * p_.Hs() * p_.Di;
    return 3.0 * ki + 3.0 * kv + qrow * (6.0 * es + 4.0) + irow * (3.0 * es + 4.0) +
           detail::valid_token_bytes(batch_, 2.0 * p_.Hkv * p_.D * 4.0 + p_.Di * 4.0);
  }
  bool has_baseline() const override { return true; }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    const Pages pages = make_pages(batch_, p_.Bs, rng, p_.shuffle);
    const int64_t T = batch_.T(), NQ = batch_.NQ(), Hs = p_.Hs();
    const std::vector<int64_t> q_shape{T, p_.Hq, p_.D}, kv_shape{pages.P, p_.Hkv, pages.Bs, p_.D};
    CaseData d;
    d.slots.push_back(detail::random_input("q", p_.dtype, q_shape, rng, 2.0, perf));
    d.slots.push_back(detail::random_input("qi", p_.dtype, {T, Hs, p_.Di}, rng, 2.0, perf));
    d.slots.push_back(detail::cache_input("k_cache", batch_, pages, p_.Hkv, p_.D, p_.dtype, rng, 1.0, perf));
    d.slots.push_back(detail::cache_input("v_cache", batch_, pages, p_.Hkv, p_.D, p_.dtype, rng, 1.0, perf));
    detail::push_indexer_key_slots(d, p_, batch_, pages, rng, perf);
    detail::push_index_slots(d, batch_, pages);
    d.slots.push_back(Slot::input("synthetic_idx", selection(seed)));
    d.slots.push_back(detail::random_input("dout", p_.dtype, q_shape, rng, 1.0, perf));
    d.slots.push_back(Slot::output("block_score", hal::DType::f32, {NQ, Hs, pages.max_blocks}, {}));
    d.slots.push_back(Slot::output("block_idx", hal::DType::i32, {NQ, Hs, p_.k}, {}));
    d.slots.push_back(Slot::output("block_cnt", hal::DType::i32, {NQ, Hs}, {}));
    detail::push_out_lse(d, p_, batch_);
    const Compare grad = Compare::grad(p_.dtype);
    d.slots.push_back(Slot::output("dq", hal::DType::f32, q_shape, grad));
    for (const char* g : {"dk_cache", "dv_cache"}) d.slots.push_back(Slot::output(g, hal::DType::f32, kv_shape, grad));
    d.slots.push_back(Slot::output("kl", hal::DType::f32, {T, Hs}, Compare::lse(p_.dtype)));
    d.slots.push_back(Slot::output("dqi", hal::DType::f32, {T, Hs, p_.Di}, grad));
    d.slots.push_back(Slot::output("dki_cache", hal::DType::f32, {pages.P, pages.Bs, p_.Di}, grad));
    // The baseline's outputs: not compared (a check runs the msa chain only).
    d.slots.push_back(Slot::output("dense_out", p_.dtype, q_shape, {}));
    d.slots.push_back(Slot::output("dense_lse", hal::DType::f32, {T, p_.Hq}, {}));
    d.slots.push_back(Slot::output("dense_dq", hal::DType::f32, q_shape, {}));
    for (const char* g : {"dense_dk", "dense_dv"}) d.slots.push_back(Slot::output(g, hal::DType::f32, kv_shape, {}));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    const ops::IndexerScoreArgs ia = indexer_args(p_, batch_, t);
    const ops::BlockTopkArgs ta = topk_args(p_, batch_, t);
    ops::SparseAttentionArgs sa = sparse_args(p_, batch_, t);
    sa.block_idx = t("synthetic_idx");  // not block_topk's: the selection is controlled
    const ops::SparseAttentionBackwardArgs ba = sparse_backward_args(sa, t);
    ops::IndexerKlArgs ka;  // dkl absent: all ones, as bench_training.py
    ka.qi = ia.qi, ka.ki_cache = ia.ki_cache, ka.q = sa.q, ka.k_cache = sa.k_cache, ka.lse = sa.lse;
    ka.block_table = sa.block_table, ka.kv_len = sa.kv_len, ka.cu_q = sa.cu_q, ka.block_idx = sa.block_idx;
    ka.stage = ops::KlStage::sparse, ka.Qb = sa.Qb, ka.NQ = sa.NQ, ka.mode = sa.mode, ka.scale = sa.scale;
    ka.kl = t("kl"), ka.dqi = t("dqi"), ka.dki_cache = t("dki_cache");
    return chain(
        {make_launch(dev, hal::OpId::indexer_score, ia, &ops::indexer_score),
         make_launch(dev, hal::OpId::block_topk, ta, &ops::block_topk),
         make_launch(dev, hal::OpId::sparse_block_attention, sa, &ops::sparse_block_attention),
         make_launch(dev, hal::OpId::sparse_block_attention_backward, ba, &ops::sparse_block_attention_backward),
         make_launch(dev, hal::OpId::indexer_kl, ka, &ops::indexer_kl)});
  }
  Launch bind_baseline(hal::Device& dev, const Bound& t) const override {
    const ops::DenseAttentionArgs fa = dense_args(p_, t, "dense_out", "dense_lse");
    const ops::DenseAttentionBackwardArgs ba = dense_backward_args(fa, t, "dense_dq", "dense_dk", "dense_dv");
    return chain({make_launch(dev, hal::OpId::dense_attention, fa, &ops::dense_attention),
                  make_launch(dev, hal::OpId::dense_attention_backward, ba, &ops::dense_attention_backward)});
  }

 private:
  // The launches one after the other; supported when each is.
  static Launch chain(std::vector<Launch> ls) {
    return {[ls] {
              for (const Launch& l : ls)
                if (std::string r = l.supports(); !r.empty()) return r;
              return std::string();
            },
            [ls] {
              for (const Launch& l : ls) l.run();
            }};
  }
  hal::HostTensor selection(uint64_t seed) const {
    return synthetic_block_idx(batch_, p_.Bs, p_.Hs(), p_.k, p_.n_sink, p_.n_local, kind_,
                               detail::stream_seed(seed, 7));
  }
  double keys_attended() const {
    std::call_once(keys_once_, [&] { keys_ = selection_stats(batch_, p_.Bs, selection(seed())).pairs; });
    return keys_;
  }
  AttnParams p_;
  Batch batch_;
  SyntheticSelection kind_;
  mutable std::once_flag keys_once_;
  mutable double keys_ = 0;
};

}  // namespace

std::unique_ptr<Case> msa_layer_backward_case(const AttnParams& p, SyntheticSelection kind) {
  return std::make_unique<MsaLayerBackwardCase>(p, kind);
}

}  // namespace msa::cases
