// sparse_block_attention_backward, dense_attention_backward, patch_attention_3d_backward
// and indexer_kl cases (docs/training.md).
#include "check/training_cases.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <string_view>

#include "check/attention_args.h"
#include "check/attn_common.h"
#include "hal/error.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace msa::cases {
namespace {

// Backward flops per forward flop: the forward's two products (q.k, p.v) are redone once
// (q.k) and the gradient adds four (dp, dq, dk, dv).
constexpr double kBackwardFlopRatio = 2.5;

const Slot& slot_of(const CaseData& d, std::string_view name) {
  for (const Slot& s : d.slots)
    if (s.name == name) return s;
  throw Error("cases: no slot named '" + std::string(name) + "'");
}

void drop_slots(CaseData& d, std::initializer_list<std::string_view> names) {
  std::erase_if(d.slots, [&](const Slot& s) { return std::find(names.begin(), names.end(), s.name) != names.end(); });
}

// Runs `forward` on cpu-ref over d's inputs and turns its output slots (out, lse) into
// inputs holding the reference's values: both devices then get the same out/lse. A timed
// case (perf) takes them from `cpu` when it is built: cpu-ref's f64 forward would take
// minutes at training sizes, and the timing does not depend on the values.
void reference_outputs_as_inputs(const Case& forward, CaseData& d, bool timed = false) {
  std::unique_ptr<hal::Device> ref;
  if (timed) {
    try {
      ref = hal::create_device("cpu");
    } catch (const std::exception&) {
      ref = nullptr;
    }
  }
  if (ref == nullptr) ref = hal::create_device("cpu-ref");
  std::vector<hal::HostTensor> got = run_outputs(forward, *ref, d);
  for (size_t i = 0; i < d.slots.size(); ++i)
    if (d.slots[i].role == Role::out) d.slots[i] = Slot::input(d.slots[i].name, std::move(got[i]));
}

// The three f32 gradient outputs named `names` with the shapes of slots `like`.
void push_gradients(CaseData& d, hal::DType t, std::initializer_list<std::pair<const char*, const char*>> names) {
  for (const auto& [grad, like] : names)
    d.slots.push_back(Slot::output(grad, hal::DType::f32, slot_of(d, like).shape, Compare::grad(t)));
}

// Tokens of every sequence's cache blocks (the slots a KV gradient writes, spare pages aside).
double cache_tokens(const Batch& batch, int Bs) {
  double n = 0;
  for (int b = 0; b < batch.B(); ++b) n += static_cast<double>(batch.blocks_of(b, Bs) * Bs);
  return n;
}

// The backward of a paged attention case (sparse or dense): the forward case's inputs and
// reference out/lse, a random dout, and dq, dk_cache, dv_cache.
class PagedBackwardCase : public Case {
 public:
  PagedBackwardCase(const AttnParams& p, bool sparse, bool timed)
      : p_(p),
        batch_(p.q_len, p.kv_len, p.Qb),
        sparse_(sparse),
        timed_(timed),
        fwd_(sparse ? sparse_attention_case(p) : dense_attention_case(p)) {}
  hal::OpId op() const override {
    return sparse_ ? hal::OpId::sparse_block_attention_backward : hal::OpId::dense_attention_backward;
  }
  std::string vars() const override { return fwd_->vars(); }
  double flops() const override { return kBackwardFlopRatio * fwd_->flops(); }
  // The forward's reads (out read instead of written), dout, and the f32 gradients.
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    const double T = static_cast<double>(batch_.T());
    return fwd_->bytes() + T * p_.Hq * p_.D * (es + 4.0) + 2.0 * cache_tokens(batch_, p_.Bs) * p_.Hkv * p_.D * 4.0;
  }
  // `perf` is ignored: the forward runs on cpu-ref over the whole inputs (never tiled).
  CaseData make_data(uint64_t seed, bool) const override {
    CaseData d = fwd_->make_data(seed, false);
    reference_outputs_as_inputs(*fwd_, d, timed_);
    Rng rng(detail::stream_seed(seed, 21));
    d.slots.push_back(detail::random_input("dout", p_.dtype, {batch_.T(), p_.Hq, p_.D}, rng, 1.0, false));
    push_gradients(d, p_.dtype, {{"dq", "q"}, {"dk_cache", "k_cache"}, {"dv_cache", "k_cache"}});
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    if (sparse_)
      return make_launch(dev, op(), sparse_backward_args(sparse_args(p_, batch_, t), t),
                         &ops::sparse_block_attention_backward);
    return make_launch(dev, op(), dense_backward_args(dense_args(p_, t), t), &ops::dense_attention_backward);
  }
  // Timed cases: the forward on the same inputs as the baseline. It writes its out / lse
  // over the given ones (the device's own forward of the same inputs, as in training).
  bool has_baseline() const override { return timed_; }
  Launch bind_baseline(hal::Device& dev, const Bound& t) const override { return fwd_->bind(dev, t); }

 private:
  AttnParams p_;
  Batch batch_;
  bool sparse_, timed_;
  std::unique_ptr<Case> fwd_;
};

class PatchBackwardCase : public Case {
 public:
  PatchBackwardCase(const VitParams& p, bool timed) : p_(p), timed_(timed), fwd_(patch_attention_3d_case(p)) {}
  hal::OpId op() const override { return hal::OpId::patch_attention_3d_backward; }
  std::string vars() const override { return fwd_->vars(); }
  double flops() const override { return kBackwardFlopRatio * fwd_->flops(); }
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    int64_t N = 0;
    for (const auto& it : p_.items) N += int64_t{it[0]} * it[1] * it[2];
    return fwd_->bytes() + static_cast<double>(N) * p_.H * p_.D * (es + 3 * 4.0);
  }
  CaseData make_data(uint64_t seed, bool) const override {
    CaseData d = fwd_->make_data(seed, false);
    reference_outputs_as_inputs(*fwd_, d, timed_);
    Rng rng(detail::stream_seed(seed, 21));
    d.slots.push_back(detail::random_input("dout", p_.dtype, slot_of(d, "q").shape, rng, 1.0, false));
    push_gradients(d, p_.dtype, {{"dq", "q"}, {"dk", "k"}, {"dv", "v"}});
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::PatchAttention3dBackwardArgs a;
    a.dout = t("dout");
    a.q = t("q"), a.k = t("k"), a.v = t("v"), a.items = t("items");
    a.window = p_.window;
    a.scale = p_.scale;
    a.out = t("out"), a.lse = t("lse");
    a.dq = t("dq"), a.dk = t("dk"), a.dv = t("dv");
    return make_launch(dev, op(), a, &ops::patch_attention_3d_backward);
  }
  // Timed cases: the forward as the baseline (as PagedBackwardCase).
  bool has_baseline() const override { return timed_; }
  Launch bind_baseline(hal::Device& dev, const Bound& t) const override { return fwd_->bind(dev, t); }

 private:
  VitParams p_;
  bool timed_;
  std::unique_ptr<Case> fwd_;
};

class IndexerKlCase : public Case {
 public:
  IndexerKlCase(const AttnParams& p, ops::KlStage stage, bool with_dkl, bool timed)
      : p_(p),
        batch_(p.q_len, p.kv_len, p.Qb),
        stage_(stage),
        with_dkl_(with_dkl),
        timed_(timed),
        fwd_(sparse() ? sparse_attention_case(p) : dense_attention_case(p)) {}
  hal::OpId op() const override { return hal::OpId::indexer_kl; }
  std::string vars() const override {
    std::string v = fwd_->vars();
    if (!sparse()) v += std::string(" mode=") + ops::mode_name(p_.mode);
    v += " Hi=" + std::to_string(p_.Hs()) + " Di=" + std::to_string(p_.Di) + " ki=" + hal::dtype_name(p_.ki_dtype);
    v += std::string(" stage=") + ops::stage_name(stage_) + (with_dkl_ ? " dkl=random" : " dkl=ones");
    return v;
  }
  // The target's q.k per query head and token, the student's logits and its two gradients
  // per selection head and token.
  double flops() const override {
    const double pairs_heads = fwd_->flops() / (4.0 * p_.D);  // (query, token) pairs x query heads
    return 2.0 * p_.D * pairs_heads + 6.0 * p_.Di * pairs_heads * p_.Hs() / p_.Hq;
  }
  // An estimate: the forward's reads (v standing in for the indexer keys), qi, kl and the
  // f32 gradients.
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    const double T = static_cast<double>(batch_.T());
    return fwd_->bytes() + T * p_.Hs() * (p_.Di * (es + 4.0) + 8.0) + cache_tokens(batch_, p_.Bs) * p_.Di * 4.0;
  }
  CaseData make_data(uint64_t seed, bool) const override {
    detail::PagedInputs in = detail::paged_attention_inputs(p_, batch_, seed, false, sparse());
    CaseData& d = in.data;
    detail::push_out_lse(d, p_, batch_);
    reference_outputs_as_inputs(*fwd_, d, timed_);
    if (!timed_) drop_slots(d, {"v_cache", "out"});  // a timed case keeps them for its baseline
    Rng rng(detail::stream_seed(seed, 23));
    const int64_t T = batch_.T(), Hs = p_.Hs();
    d.slots.push_back(detail::random_input("qi", p_.dtype, {T, Hs, p_.Di}, rng, 2.0, false));
    d.slots.push_back(detail::cache_input("ki_cache", batch_, in.pages, 0, p_.Di, p_.ki_dtype, rng, 1.0, false));
    d.slots.push_back(with_dkl_ ? detail::random_input("dkl", hal::DType::f32, {T, Hs}, rng, 1.0, false)
                                : Slot::none("dkl"));
    const hal::DType t =
        p_.dtype == hal::DType::f32 && p_.ki_dtype == hal::DType::f32 ? hal::DType::f32 : hal::DType::bf16;
    d.slots.push_back(Slot::output("kl", hal::DType::f32, {T, Hs}, Compare::lse(t)));
    push_gradients(d, t, {{"dqi", "qi"}, {"dki_cache", "ki_cache"}});
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    ops::IndexerKlArgs a;
    a.qi = t("qi"), a.ki_cache = t("ki_cache"), a.q = t("q"), a.k_cache = t("k_cache"), a.lse = t("lse");
    a.block_table = t("block_table"), a.kv_len = t("kv_len"), a.cu_q = t("cu_q");
    a.dkl = t("dkl");
    a.stage = stage_;
    if (sparse()) {
      a.block_idx = t("block_idx");
      a.Qb = p_.Qb;
      a.NQ = batch_.NQ();
    }
    a.mode = p_.mode;
    a.scale = p_.scale;
    a.kl = t("kl"), a.dqi = t("dqi"), a.dki_cache = t("dki_cache");
    return make_launch(dev, op(), a, &ops::indexer_kl);
  }
  // Timed cases: the main branch's forward of the stage (whose lse the target reads) as
  // the baseline (as PagedBackwardCase).
  bool has_baseline() const override { return timed_; }
  Launch bind_baseline(hal::Device& dev, const Bound& t) const override { return fwd_->bind(dev, t); }

 private:
  bool sparse() const { return stage_ == ops::KlStage::sparse; }
  AttnParams p_;
  Batch batch_;
  ops::KlStage stage_;
  bool with_dkl_, timed_;
  std::unique_ptr<Case> fwd_;
};

}  // namespace

std::unique_ptr<Case> sparse_attention_backward_case(const AttnParams& p, bool timed) {
  return std::make_unique<PagedBackwardCase>(p, true, timed);
}
std::unique_ptr<Case> dense_attention_backward_case(const AttnParams& p, bool timed) {
  return std::make_unique<PagedBackwardCase>(p, false, timed);
}
std::unique_ptr<Case> patch_attention_3d_backward_case(const VitParams& p, bool timed) {
  return std::make_unique<PatchBackwardCase>(p, timed);
}
std::unique_ptr<Case> sparse_attention_backward_case(const AttnParams& p) {
  return sparse_attention_backward_case(p, false);
}
std::unique_ptr<Case> dense_attention_backward_case(const AttnParams& p) {
  return dense_attention_backward_case(p, false);
}
std::unique_ptr<Case> patch_attention_3d_backward_case(const VitParams& p) {
  return patch_attention_3d_backward_case(p, false);
}
std::unique_ptr<Case> indexer_kl_case(const AttnParams& p, ops::KlStage stage, bool with_dkl, bool timed) {
  return std::make_unique<IndexerKlCase>(p, stage, with_dkl, timed);
}

}  // namespace msa::cases
