// indexer_score, block_topk and indexer_topk cases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "hal/error.h"
#include "hal/host_tensor.h"

#include "check/attention_args.h"
#include "check/attention_cases.h"
#include "check/attn_common.h"
#include "ops/ops.h"

namespace msa::cases {
namespace {

class IndexerCase : public Case {
 public:
  explicit IndexerCase(const AttnParams& p) : p_(p), batch_(p.q_len, p.kv_len, p.Qb) {}
  hal::OpId op() const override { return hal::OpId::indexer_score; }
  std::string vars() const override { return attn_vars(p_, VarsKind::indexer); }
  double flops() const override { return 2.0 * p_.Di * p_.Hs() * dense_pairs(batch_); }
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    const double T = static_cast<double>(batch_.T()), NQ = static_cast<double>(batch_.NQ());
    const double mb = static_cast<double>(detail::max_blocks_of(batch_, p_.Bs) + 1);
    return detail::valid_token_bytes(batch_, detail::indexer_key_bytes(p_)) + T * p_.Hs() * p_.Di * es +
           NQ * p_.Hs() * mb * 4.0;
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    const Pages pages = make_pages(batch_, p_.Bs, rng, p_.shuffle);
    CaseData d;
    d.slots.push_back(detail::random_input("qi", p_.dtype, {batch_.T(), p_.Hs(), p_.Di}, rng, 2.0, perf));
    detail::push_indexer_key_slots(d, p_, batch_, pages, rng, perf);
    detail::push_index_slots(d, batch_, pages);
    d.slots.push_back(
        Slot::output("block_score", hal::DType::f32, {batch_.NQ(), p_.Hs(), pages.max_blocks}, Compare::lse(p_.dtype)));
    apply_poison(d, p_.poison, pages);
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    return make_launch(dev, op(), indexer_args(p_, batch_, t), &ops::indexer_score);
  }

 private:
  AttnParams p_;
  Batch batch_;
};

// Scores [NQ][Hs][MB]: normal values, some rows quantised (ties), sprinkled with NaN,
// -inf and signed zeros; entries past the valid blocks hold junk (+inf, huge, NaN) that
// the op must ignore.
hal::HostTensor topk_scores(const AttnParams& p, const Batch& batch, int64_t MB, Rng& rng, bool perf) {
  const int64_t NQ = batch.NQ(), Hs = p.Hs();
  hal::HostTensor t(hal::DType::f32, {NQ, Hs, MB});
  float* s = t.data<float>();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n = 0; n < NQ; ++n) {
    const int64_t nvalid = batch.qblocks[static_cast<size_t>(n)].p1 / p.Bs + 1;
    for (int64_t h = 0; h < Hs; ++h) {
      float* row = s + (n * Hs + h) * MB;
      const bool special = p.special_scores && !perf;
      const bool ties = special && rng.chance(0.3);
      const bool mostly_dead = special && rng.chance(0.1);  // few finite scores: block_cnt < k
      for (int64_t c = 0; c < MB; ++c) {
        float v = static_cast<float>(rng.normal());
        if (ties) v = std::round(v * 2.0f) / 2.0f;
        if (special) {
          const double u = rng.uniform();
          if (mostly_dead ? u < 0.8 : u < 0.05)
            v = -inf;
          else if (u < (mostly_dead ? 0.9 : 0.09))
            v = nan;
          else if (u < 0.11)
            v = rng.chance(0.5) ? 0.0f : -0.0f;
        }
        if (c >= nvalid && special) {
          const double u = rng.uniform();
          v = u < 0.3 ? inf : u < 0.6 ? 1e30f : u < 0.8 ? nan : v;
        }
        row[c] = v;
      }
    }
  }
  return t;
}

class TopkCase : public Case {
 public:
  explicit TopkCase(const AttnParams& p) : p_(p), batch_(p.q_len, p.kv_len, p.Qb) {}
  hal::OpId op() const override { return hal::OpId::block_topk; }
  std::string vars() const override {
    return attn_vars(p_, VarsKind::topk) + (p_.special_scores ? " scores=nan,-inf,ties" : "");
  }
  double flops() const override { return 0; }
  double bytes() const override {
    double valid = 0;
    for (const QueryBlock& qb : batch_.qblocks) valid += static_cast<double>(qb.p1 / p_.Bs + 1);
    return valid * p_.Hs() * 4.0 + static_cast<double>(batch_.NQ()) * p_.Hs() * (p_.k + 1) * 4.0;
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    const int64_t MB = detail::max_blocks_of(batch_, p_.Bs) + 1;
    CaseData d;
    d.slots.push_back(Slot::input("block_score", topk_scores(p_, batch_, MB, rng, perf)));
    d.slots.push_back(Slot::input("kv_len", batch_.kv_len_tensor()));
    d.slots.push_back(Slot::input("cu_q", batch_.cu_q_tensor()));
    d.slots.push_back(Slot::output("block_idx", hal::DType::i32, {batch_.NQ(), p_.Hs(), p_.k}, Compare::exact()));
    d.slots.push_back(Slot::output("block_cnt", hal::DType::i32, {batch_.NQ(), p_.Hs()}, Compare::exact()));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    return make_launch(dev, op(), topk_args(p_, batch_, t), &ops::block_topk);
  }

 private:
  AttnParams p_;
  Batch batch_;
};

// ops::indexer_topk (indexer_score, then block_topk on its scores; a backend may fuse the
// select into the indexer). block_score is compared with the reference's; the selection
// must be exactly cpu-ref's block_topk over this device's own scores (comparing it with
// the reference's selection would fail on near ties that rounding may flip).
class IndexerTopkCase : public Case {
 public:
  explicit IndexerTopkCase(const AttnParams& p) : p_(p), batch_(p.q_len, p.kv_len, p.Qb) {}
  hal::OpId op() const override { return hal::OpId::indexer_topk; }
  std::string vars() const override {
    return attn_vars(p_, VarsKind::indexer) + " k=" + std::to_string(p_.k) +
           (p_.special_scores ? " scores=ties(head 0)" : "");
  }
  double flops() const override { return IndexerCase(p_).flops(); }
  double bytes() const override {
    return IndexerCase(p_).bytes() + static_cast<double>(batch_.NQ()) * p_.Hs() * (p_.k + 1) * 4.0;
  }
  // With special_scores (not in perf), indexer head 0 gets zero queries: every score of
  // its rows is exactly 0, so the select runs on ties (lower blocks first) and forced blocks.
  CaseData make_data(uint64_t seed, bool perf) const override {
    CaseData d = IndexerCase(p_).make_data(seed, perf);
    if (p_.special_scores && !perf) {
      hal::HostTensor& qi = d.slots[0].host;  // [T][Hs][Di]
      const int64_t T = qi.shape[0], Hs = qi.shape[1], Di = qi.shape[2];
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < Di; ++j) qi.set(static_cast<size_t>((t * Hs) * Di + j), 0.0f);
    }
    d.slots.push_back(Slot::output("block_idx", hal::DType::i32, {batch_.NQ(), p_.Hs(), p_.k}, {}));
    d.slots.push_back(Slot::output("block_cnt", hal::DType::i32, {batch_.NQ(), p_.Hs()}, {}));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    const ops::IndexerScoreArgs ia = indexer_args(p_, batch_, t);
    const ops::BlockTopkArgs ta = topk_args(p_, batch_, t);
    return {[&dev, ia, ta] {
              for (auto [op, args] :
                   {std::pair<hal::OpId, const void*>{hal::OpId::indexer_score, &ia}, {hal::OpId::block_topk, &ta}})
                if (std::string r = dev.supports(op, args); !r.empty()) return r;
              return std::string();
            },
            [&dev, ia, ta] {
              ops::indexer_topk(dev, {ia, ta});
            }};
  }
  std::string check_outputs(const CaseData& data, const std::vector<hal::HostTensor>& got,
                            hal::Device& ref) const override {
    const auto slot = [&](std::string_view name) {
      for (size_t i = 0; i < data.slots.size(); ++i)
        if (data.slots[i].name == name) return i;
      throw Error("indexer_topk case: no slot " + std::string(name));
    };
    const auto up = [&](const hal::HostTensor& h) { return hal::to_device(ref, h); };
    auto score = up(got[slot("block_score")]);
    auto kv_len = up(data.slots[slot("kv_len")].host);
    auto cu_q = up(data.slots[slot("cu_q")].host);
    auto idx = ref.alloc_tensor(hal::DType::i32, {batch_.NQ(), p_.Hs(), p_.k});
    auto cnt = ref.alloc_tensor(hal::DType::i32, {batch_.NQ(), p_.Hs()});
    ops::block_topk(ref, {score.tensor, kv_len.tensor, cu_q.tensor, p_.Qb, batch_.NQ(), p_.Bs, p_.k, p_.n_sink,
                          p_.n_local, idx.tensor, cnt.tensor});
    if (hal::to_host(ref, idx.tensor).bytes != got[slot("block_idx")].bytes)
      return "block_idx differs from cpu-ref's block_topk over this device's block_score";
    if (hal::to_host(ref, cnt.tensor).bytes != got[slot("block_cnt")].bytes)
      return "block_cnt differs from cpu-ref's block_topk over this device's block_score";
    return "";
  }

 private:
  AttnParams p_;
  Batch batch_;
};

}  // namespace

std::unique_ptr<Case> indexer_topk_case(const AttnParams& p) { return std::make_unique<IndexerTopkCase>(p); }
std::unique_ptr<Case> indexer_score_case(const AttnParams& p) { return std::make_unique<IndexerCase>(p); }
std::unique_ptr<Case> block_topk_case(const AttnParams& p) { return std::make_unique<TopkCase>(p); }

}  // namespace msa::cases
