// indexer_kl: KL(target || student) of the index branch per query and selection head, and
// its gradients to qi and ki_cache (docs/training.md, "Op: indexer_kl"). The target is the
// main branch's attention averaged over the query heads of the group (detached); the
// student is the indexer's softmax over the same token set. Scalar, one thread, double
// accumulation in a fixed order.
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu_ref/attended_sets.h"
#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {
namespace {

// One cached token: its page, its slot in the page and its position.
struct Slot {
  int64_t page, j, pos;
};

class KlKernel {
 public:
  explicit KlKernel(const ops::IndexerKlArgs& a)
      : a_(a),
        Hq_(a.q.dim(1)),
        D_(a.q.dim(2)),
        Hkv_(a.k_cache.dim(1)),
        Bs_(a.k_cache.dim(2)),
        Hs_(a.qi.dim(1)),
        Di_(a.qi.dim(2)),
        G_(Hq_ / Hkv_),
        shared_(a.mode == ops::SelectionMode::shared),
        scale_(resolve_scale(a.scale, D_)),
        scale_i_(resolve_scale(a.scale_i, Di_)),
        dqi_(static_cast<size_t>(a.qi.numel()), 0.0),
        dki_(static_cast<size_t>(a.ki_cache.numel()), 0.0),
        kl_(static_cast<size_t>(a.kl.numel()), 0.0) {}

  // Appends the valid tokens of logical block c of sequence b (kv_len tokens).
  void add_block(std::vector<Slot>& set, int64_t b, int64_t c, int64_t kv_len) const {
    const int64_t page = page_of(a_.block_table, b, c);
    for (int64_t s = c * Bs_; s < std::min((c + 1) * Bs_, kv_len); ++s) set.push_back({page, s - c * Bs_, s});
  }

  // Query t, selection head g over the tokens of `set` at or before position `pos`.
  void query(int64_t t, int64_t g, const std::vector<Slot>& set, int64_t pos) {
    slots_.clear();
    for (const Slot& s : set)
      if (s.pos <= pos) slots_.push_back(s);
    const size_t n = slots_.size();
    if (n == 0) return;  // empty set: kl = 0, no gradient
    // Target p: the mean over the group's heads; a head whose lse is -inf adds nothing.
    const int64_t h0 = shared_ ? 0 : g * G_, nh = shared_ ? Hq_ : G_;
    p_.assign(n, 0.0);
    for (int64_t h = h0; h < h0 + nh; ++h) {
      const double lse = static_cast<double>(a_.lse.data<const float>()[t * Hq_ + h]);
      if (lse == kNegInf) continue;
      load_row(a_.q, (t * Hq_ + h) * D_, D_, row_.data());
      const int64_t kvh = h / G_;
      for (size_t i = 0; i < n; ++i) {
        load_row(a_.k_cache, ((slots_[i].page * Hkv_ + kvh) * Bs_ + slots_[i].j) * D_, D_, key_.data());
        p_[i] += std::exp(scale_ * dot(row_.data(), key_.data(), D_) - lse);
      }
    }
    for (double& p : p_) p /= static_cast<double>(nh);
    // Student u: softmax of the indexer logits.
    load_row(a_.qi, (t * Hs_ + g) * Di_, Di_, qi_.data());
    logit_.resize(n);
    double m = kNegInf;
    for (size_t i = 0; i < n; ++i) {
      load_row(a_.ki_cache, (slots_[i].page * Bs_ + slots_[i].j) * Di_, Di_, key_.data());
      logit_[i] = scale_i_ * dot(qi_.data(), key_.data(), Di_);
      m = std::max(m, logit_[i]);
    }
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) sum += std::exp(logit_[i] - m);
    const double lse_u = m + std::log(sum);
    double kl = 0.0;
    for (size_t i = 0; i < n; ++i)
      if (p_[i] != 0.0) kl += p_[i] * (std::log(p_[i]) - (logit_[i] - lse_u));
    kl_[static_cast<size_t>(t * Hs_ + g)] = kl;
    // d kl / d logit = u - p, weighted by dkl and scale_i.
    const double w = (a_.dkl.present() ? static_cast<double>(a_.dkl.data<const float>()[t * Hs_ + g]) : 1.0) * scale_i_;
    double* dqi = dqi_.data() + (t * Hs_ + g) * Di_;
    for (size_t i = 0; i < n; ++i) {
      const double coeff = w * (std::exp(logit_[i] - lse_u) - p_[i]);
      load_row(a_.ki_cache, (slots_[i].page * Bs_ + slots_[i].j) * Di_, Di_, key_.data());
      double* dki = dki_.data() + (slots_[i].page * Bs_ + slots_[i].j) * Di_;
      for (int64_t d = 0; d < Di_; ++d) {
        dqi[d] += coeff * key_[static_cast<size_t>(d)];
        dki[d] += coeff * qi_[static_cast<size_t>(d)];
      }
    }
  }

  void store() const {
    for (size_t i = 0; i < kl_.size(); ++i) a_.kl.data<float>()[i] = static_cast<float>(kl_[i]);
    for (size_t i = 0; i < dqi_.size(); ++i) a_.dqi.data<float>()[i] = static_cast<float>(dqi_[i]);
    for (size_t i = 0; i < dki_.size(); ++i) a_.dki_cache.data<float>()[i] = static_cast<float>(dki_[i]);
  }

  int64_t Hkv() const { return Hkv_; }
  int64_t Bs() const { return Bs_; }
  int64_t Hs() const { return Hs_; }

 private:
  const ops::IndexerKlArgs& a_;
  const int64_t Hq_, D_, Hkv_, Bs_, Hs_, Di_, G_;
  const bool shared_;
  const double scale_, scale_i_;
  std::vector<double> dqi_, dki_, kl_;
  std::vector<Slot> slots_;
  std::vector<double> p_, logit_;
  std::vector<double> row_ = std::vector<double>(static_cast<size_t>(D_));
  std::vector<double> key_ = std::vector<double>(static_cast<size_t>(std::max(D_, Di_)));
  std::vector<double> qi_ = std::vector<double>(static_cast<size_t>(Di_));
};

}  // namespace

void indexer_kl(hal::Stream&, const ops::IndexerKlArgs& a) {
  const char* op = "indexer_kl";
  const int64_t Bs = a.k_cache.dim(2);
  const bool sparse = a.stage == ops::KlStage::sparse;
  const Batch batch = sparse ? checked_sparse_batch(op, a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q, a.Qb, a.NQ,
                                                    a.mode, a.block_idx)
                             : checked_dense_batch(op, a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q);
  MSA_CHECK_ARG(a.qi.dim(1) == (a.mode == ops::SelectionMode::shared ? 1 : a.k_cache.dim(1)), op, "qi",
                "Hi must equal Hs (Hkv per_kv_head, 1 shared), got " + std::to_string(a.qi.dim(1)));

  KlKernel k(a);
  std::vector<Slot> set;
  if (sparse) {
    std::vector<int64_t> blocks;
    for (int64_t n = 0; n < batch.nq(); ++n) {
      const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
      const Sequence& s = batch.seqs[static_cast<size_t>(qb.seq)];
      for (int64_t g = 0; g < k.Hs(); ++g) {
        selected_blocks(batch, a.block_idx, n, g, Bs, blocks);
        set.clear();
        for (const int64_t c : blocks) k.add_block(set, qb.seq, c, s.kv_len);
        for (int64_t t = qb.t_begin; t < qb.t_end; ++t) k.query(t, g, set, s.pos0 + (t - s.q_begin));
      }
    }
  } else {
    for (size_t b = 0; b < batch.seqs.size(); ++b) {
      const Sequence& s = batch.seqs[b];
      set.clear();
      for (int64_t c = 0; c < s.n_blocks; ++c) k.add_block(set, static_cast<int64_t>(b), c, s.kv_len);
      for (int64_t g = 0; g < k.Hs(); ++g)
        for (int64_t i = 0; i < s.q_len; ++i) k.query(s.q_begin + i, g, set, s.pos0 + i);
    }
  }
  k.store();
}

}  // namespace msa::cpu_ref
