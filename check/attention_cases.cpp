// sparse_block_attention, dense_attention and msa_layer cases, and the helpers shared
// with the selection cases (selection_cases.cpp).
#include "check/attention_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>

#include "check/attention_args.h"
#include "check/attn_common.h"
#include "hal/nvfp4.h"
#include "ops/ops.h"

namespace msa::cases {
namespace detail {

Slot random_input(std::string name, hal::DType dtype, std::vector<int64_t> shape, Rng& rng, double sigma, bool perf) {
  bool tiled = false;
  hal::HostTensor t =
      perf ? random_tile(dtype, shape, rng, sigma, size_t{32} << 20, tiled) : random_tensor(dtype, shape, rng, sigma);
  Slot s = Slot::input(std::move(name), std::move(t));
  s.shape = std::move(shape);
  s.tiled = tiled;
  return s;
}

Slot random_walk_input(std::string name, hal::DType dtype, const Batch& batch, int H, int D, Rng& rng, double sigma,
                       double a) {
  const int64_t T = batch.T(), HD = int64_t{H} * D;
  hal::HostTensor t(dtype, {T, H, D});
  std::vector<double> x(static_cast<size_t>(HD));
  const double b = std::sqrt(1.0 - a * a);
  for (int64_t i = 0; i < T; ++i) {
    const bool first = i == 0 || batch.token_seq[static_cast<size_t>(i)] != batch.token_seq[static_cast<size_t>(i - 1)];
    for (int64_t j = 0; j < HD; ++j) {
      x[static_cast<size_t>(j)] = first ? rng.normal() : a * x[static_cast<size_t>(j)] + b * rng.normal();
      t.set(static_cast<size_t>(i * HD + j), static_cast<float>(sigma * x[static_cast<size_t>(j)]));
    }
  }
  return Slot::input(std::move(name), std::move(t));
}

void add_block_structure(Slot& s, int Bs, Rng& rng, double strength) {
  const int64_t D = s.shape.back(), rows = s.host.numel() / D;
  std::vector<float> m(static_cast<size_t>(D));
  for (int64_t r = 0; r < rows; ++r) {
    if (r % Bs == 0)
      for (auto& x : m) x = static_cast<float>(strength * rng.normal());
    for (int64_t d = 0; d < D; ++d) {
      const size_t i = static_cast<size_t>(r * D + d);
      s.host.set(i, s.host.get(i) + m[static_cast<size_t>(d)]);
    }
  }
}

Slot cache_input(std::string name, const Batch& batch, const Pages& pages, int heads, int D, hal::DType dtype, Rng& rng,
                 double sigma, bool perf) {
  bool tiled = false;
  hal::HostTensor t = make_cache(batch, pages, heads, D, dtype, rng, sigma, perf, tiled);
  Slot s = Slot::input(std::move(name), std::move(t));
  s.shape = heads > 0 ? std::vector<int64_t>{pages.P, heads, pages.Bs, D} : std::vector<int64_t>{pages.P, pages.Bs, D};
  s.tiled = tiled;
  return s;
}

void push_index_slots(CaseData& d, const Batch& batch, const Pages& pages) {
  d.slots.push_back(Slot::input("block_table", pages.table_tensor(batch.B())));
  d.slots.push_back(Slot::input("kv_len", batch.kv_len_tensor()));
  d.slots.push_back(Slot::input("cu_q", batch.cu_q_tensor()));
}

void push_out_lse(CaseData& d, const AttnParams& p, const Batch& batch) {
  d.slots.push_back(Slot::output("out", p.dtype, {batch.T(), p.Hq, p.D}, Compare::out(p.dtype)));
  d.slots.push_back(Slot::output("lse", hal::DType::f32, {batch.T(), p.Hq}, Compare::lse(p.dtype)));
}

Slot ki_scale_input(const Batch& batch, const Pages& pages, Rng& rng, bool perf) {
  hal::HostTensor t(hal::DType::f32, {pages.P, pages.Bs});
  float* s = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) s[i] = static_cast<float>(rng.uniform(0.5, 2.0));
  if (!perf) {
    for (int64_t p = 0; p < pages.P; ++p) {
      for (int64_t j = pages.first_slack(batch, p); j < pages.Bs; ++j) s[p * pages.Bs + j] = std::nanf("");
    }
  }
  return Slot::input("ki_scale", std::move(t));
}

void push_indexer_key_slots(CaseData& d, const AttnParams& p, const Batch& batch, const Pages& pages, Rng& rng,
                            bool perf, bool add_structure) {
  if (p.ki_dtype != hal::DType::fp4_e2m1x2) {
    d.slots.push_back(cache_input("ki_cache", batch, pages, 0, p.Di, p.ki_dtype, rng, 1.0, perf));
    if (add_structure) add_block_structure(d.slots.back(), p.Bs, rng, 2.0);
    d.slots.push_back(p.ki_scale ? ki_scale_input(batch, pages, rng, perf) : Slot::none("ki_scale"));
    return;
  }
  // NVFP4: random code bytes (every E2M1 value of both signs), scales 2^[-4, 2) rounded to
  // e4m3; a slack slot's scales are NaN, which must not reach any score.
  d.slots.push_back(cache_input("ki_cache", batch, pages, 0, p.Di / 2, p.ki_dtype, rng, 1.0, perf));
  d.slots.push_back(nvfp4_scale_input(batch, pages, p.Di, rng, perf));
}

Slot nvfp4_scale_input(const Batch& batch, const Pages& pages, int Di, Rng& rng, bool perf) {
  const int64_t G = Di / hal::kNvfp4Group;
  hal::HostTensor t(hal::DType::fp8_e4m3, {pages.P, pages.Bs, G});
  auto* s = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i)
    s[i] = hal::f32_to_fp8_e4m3(static_cast<float>(std::exp2(rng.uniform(-4.0, 2.0))));
  if (!perf) {
    for (int64_t pg = 0; pg < pages.P; ++pg)
      for (int64_t j = pages.first_slack(batch, pg) * G; j < pages.Bs * G; ++j)
        s[pg * pages.Bs * G + j] = 0x7f;  // e4m3 NaN
  }
  return Slot::input("ki_scale", std::move(t));
}

double indexer_key_bytes(const AttnParams& p) {
  if (p.ki_dtype == hal::DType::fp4_e2m1x2) return p.Di / 2.0 + p.Di / static_cast<double>(hal::kNvfp4Group);
  return p.Di * static_cast<double>(hal::dtype_size(p.ki_dtype)) + (p.ki_scale ? 4.0 : 0.0);
}

double valid_token_bytes(const Batch& batch, double row_bytes) {
  double s = 0;
  for (int32_t kv : batch.kv_len) s += kv * row_bytes;
  return s;
}

int64_t max_blocks_of(const Batch& batch, int Bs) {
  int64_t m = 0;
  for (int b = 0; b < batch.B(); ++b) m = std::max(m, batch.blocks_of(b, Bs));
  return m;
}

}  // namespace detail

std::string attn_vars(const AttnParams& p, VarsKind kind) {
  const Batch batch(p.q_len, p.kv_len, p.Qb);
  const bool main = kind != VarsKind::indexer && kind != VarsKind::topk;
  const bool indexer = kind == VarsKind::indexer || kind == VarsKind::layer;
  const bool selection = kind != VarsKind::dense;
  const bool topk = kind == VarsKind::topk || kind == VarsKind::layer;
  std::string s = "B=" + std::to_string(batch.B()) + " T=" + std::to_string(batch.T()) + " " + batch.lens();
  if (main) s += " Hq=" + std::to_string(p.Hq) + " Hkv=" + std::to_string(p.Hkv) + " D=" + std::to_string(p.D);
  if (indexer) {
    s += " Hi=" + std::to_string(p.Hs()) + " Di=" + std::to_string(p.Di) + " ki=" + hal::dtype_name(p.ki_dtype);
    if (p.ki_scale) s += "+scale";
    s += std::string(" pool=") + ops::pool_name(p.pool);
  }
  if (kind == VarsKind::topk) s += " Hs=" + std::to_string(p.Hs());
  s += " Bs=" + std::to_string(p.Bs);
  if (selection) s += " Qb=" + std::to_string(p.Qb);
  if (selection && kind != VarsKind::indexer) s += " k=" + std::to_string(p.k);
  if (topk) s += " n_sink=" + std::to_string(p.n_sink) + " n_local=" + std::to_string(p.n_local);
  if (kind != VarsKind::topk) s += std::string(" dtype=") + hal::dtype_name(p.dtype);
  if (selection) s += std::string(" mode=") + ops::mode_name(p.mode);
  if (p.scale != 0.0f && kind != VarsKind::topk) s += " scale=" + std::to_string(p.scale);
  if (!p.shuffle && kind != VarsKind::topk) s += " pages=ordered";
  if (p.poison != Poison::none) s += std::string(" poison=") + poison_name(p.poison);
  return s;
}

namespace {

using detail::stream_seed;

// The block selections of a sparse case (own random stream, so flops()/bytes() can
// regenerate them without the caches).
hal::HostTensor selections(const AttnParams& p, const Batch& batch, uint64_t seed) {
  Rng rng(stream_seed(seed, 7));
  hal::HostTensor idx = make_block_idx(batch, p.Bs, p.Hs(), p.k, rng, p.correlated);
  if (p.oob_idx) {
    // Replace padding by entries that must contribute nothing: negative, or at/after the
    // sequence's last block (distinct from each other, so never duplicates).
    int32_t* bi = idx.data<int32_t>();
    for (int64_t n = 0; n < batch.NQ(); ++n) {
      const int32_t nblk = static_cast<int32_t>(batch.blocks_of(batch.qblocks[static_cast<size_t>(n)].b, p.Bs));
      for (int64_t j = 0, extra = 0; j < int64_t{p.Hs()} * p.k; ++j) {
        int32_t& e = bi[n * p.Hs() * p.k + j];
        if (e == -1) e = (extra++ % 2 == 0) ? nblk + static_cast<int32_t>(j) : -2 - static_cast<int32_t>(j);
      }
    }
  }
  if (p.empty_sel) {
    // Empty selections must give out = 0 and lse = -inf; keeping only the last block of
    // a query block that spans several leaves its earlier queries with nothing.
    int32_t* bi = idx.data<int32_t>();
    for (int64_t r = 0; r < batch.NQ() * p.Hs(); ++r) {
      int32_t* row = bi + r * p.k;
      const double u = rng.uniform();
      if (u < 0.25) {
        std::fill(row, row + p.k, -1);
      } else if (u < 0.5 && p.Qb > p.Bs) {
        const int32_t last = static_cast<int32_t>(batch.qblocks[static_cast<size_t>(r / p.Hs())].p1 / p.Bs);
        std::fill(row, row + p.k, -1);
        row[0] = last;
      }
    }
  }
  return idx;
}

}  // namespace

namespace detail {

PagedInputs paged_attention_inputs(const AttnParams& p, const Batch& batch, uint64_t seed, bool perf, bool sparse) {
  Rng rng(seed);
  PagedInputs in{{}, make_pages(batch, p.Bs, rng, p.shuffle)};
  CaseData& d = in.data;
  d.slots.push_back(random_input("q", p.dtype, {batch.T(), p.Hq, p.D}, rng, 2.0, perf));
  d.slots.push_back(cache_input("k_cache", batch, in.pages, p.Hkv, p.D, p.dtype, rng, 1.0, perf));
  d.slots.push_back(cache_input("v_cache", batch, in.pages, p.Hkv, p.D, p.dtype, rng, 1.0, perf));
  push_index_slots(d, batch, in.pages);
  if (sparse) d.slots.push_back(Slot::input("block_idx", selections(p, batch, seed)));
  return in;
}

}  // namespace detail

namespace {

class SparseCase : public Case {
 public:
  explicit SparseCase(const AttnParams& p) : p_(p), batch_(p.q_len, p.kv_len, p.Qb) {}
  hal::OpId op() const override { return hal::OpId::sparse_block_attention; }
  std::string vars() const override {
    std::string v = attn_vars(p_, VarsKind::sparse);
    if (p_.correlated) v += " select=walk";
    if (p_.oob_idx) v += " idx=out_of_range";
    if (p_.empty_sel) v += " select=some_empty";
    return v;
  }
  double flops() const override {
    const auto& st = stats();
    const double heads_per_sel = p_.mode == ops::SelectionMode::shared ? p_.Hq : p_.Hq / p_.Hkv;
    return 4.0 * p_.D * heads_per_sel * st.pairs;
  }
  double bytes() const override {
    const auto& st = stats();
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    const double kv_heads_per_sel = p_.mode == ops::SelectionMode::shared ? p_.Hkv : 1;
    const double T = static_cast<double>(batch_.T());
    return st.unique_blocks * kv_heads_per_sel * 2.0 * p_.Bs * p_.D * es  // selected K and V blocks
           + 2.0 * T * p_.Hq * p_.D * es + T * p_.Hq * 4.0                // q, out, lse
           + static_cast<double>(batch_.NQ()) * p_.Hs() * p_.k * 4.0;     // block_idx
  }
  std::vector<std::pair<std::string, double>> counters() const override {
    if (batch_.NQ() < 64) return {};
    return {{"distinct_blocks_per_64", distinct_blocks_per_64(batch_, selections(p_, batch_, seed()))}};
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    detail::PagedInputs in = detail::paged_attention_inputs(p_, batch_, seed, perf, true);
    detail::push_out_lse(in.data, p_, batch_);
    apply_poison(in.data, p_.poison, in.pages);
    return std::move(in.data);
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    return make_launch(dev, op(), sparse_args(p_, batch_, t), &ops::sparse_block_attention);
  }

 private:
  const SelectionStats& stats() const {
    std::call_once(stats_once_, [&] { stats_ = selection_stats(batch_, p_.Bs, selections(p_, batch_, seed())); });
    return stats_;
  }
  AttnParams p_;
  Batch batch_;
  mutable std::once_flag stats_once_;
  mutable SelectionStats stats_;
};

class DenseCase : public Case {
 public:
  explicit DenseCase(const AttnParams& p) : p_(p), batch_(p.q_len, p.kv_len, p.Qb) {}
  hal::OpId op() const override { return hal::OpId::dense_attention; }
  std::string vars() const override { return attn_vars(p_, VarsKind::dense); }
  double flops() const override { return 4.0 * p_.D * p_.Hq * dense_pairs(batch_); }
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    const double T = static_cast<double>(batch_.T());
    return detail::valid_token_bytes(batch_, 2.0 * p_.Hkv * p_.D * es) + 2.0 * T * p_.Hq * p_.D * es + T * p_.Hq * 4.0;
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    detail::PagedInputs in = detail::paged_attention_inputs(p_, batch_, seed, perf, false);
    detail::push_out_lse(in.data, p_, batch_);
    apply_poison(in.data, p_.poison, in.pages);
    return std::move(in.data);
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    return make_launch(dev, op(), dense_args(p_, t), &ops::dense_attention);
  }

 private:
  AttnParams p_;
  Batch batch_;
};

// indexer_topk (indexer_score -> block_topk) -> sparse_block_attention on shared inputs; the baseline is
// dense_attention on the same q, k_cache, v_cache. For benchmarks: the intermediates are
// not compared (the contract checks each op on the reference's inputs, never chained).
class MsaLayerCase : public Case {
 public:
  explicit MsaLayerCase(const AttnParams& p) : p_(p), batch_(p.q_len, p.kv_len, p.Qb) {}
  hal::OpId op() const override { return hal::OpId::sparse_block_attention; }
  std::string name() const override { return "msa_layer"; }
  std::string vars() const override {
    return attn_vars(p_, VarsKind::layer) + (p_.correlated ? " queries=walk keys=blocky" : "");
  }
  double flops() const override {
    // Indexer: every causal token for every indexer head; sparse: up to k full blocks.
    double sel_pairs = 0;
    for (const QueryBlock& qb : batch_.qblocks) {
      const double nsel = static_cast<double>(std::min<int64_t>(p_.k, qb.p1 / p_.Bs + 1));
      sel_pairs += static_cast<double>(qb.t1 - qb.t0) * std::min<double>(nsel * p_.Bs, static_cast<double>(qb.p1 + 1));
    }
    return 2.0 * p_.Di * p_.Hs() * dense_pairs(batch_) + 4.0 * p_.D * p_.Hq * sel_pairs;
  }
  double bytes() const override {
    const double es = static_cast<double>(hal::dtype_size(p_.dtype));
    const double T = static_cast<double>(batch_.T()), NQ = static_cast<double>(batch_.NQ());
    // Selected blocks per sequence and selection head: at most k per query block, and
    // never more than the sequence has (adjacent queries share blocks).
    std::vector<double> per_seq(static_cast<size_t>(batch_.B()), 0.0);
    for (const QueryBlock& qb : batch_.qblocks)
      per_seq[static_cast<size_t>(qb.b)] += static_cast<double>(std::min<int64_t>(p_.k, qb.p1 / p_.Bs + 1));
    double blocks = 0;
    for (int b = 0; b < batch_.B(); ++b)
      blocks += std::min(per_seq[static_cast<size_t>(b)], static_cast<double>(batch_.blocks_of(b, p_.Bs)));
    const double kv_per_sel = p_.mode == ops::SelectionMode::shared ? p_.Hkv : 1;
    return detail::valid_token_bytes(batch_, detail::indexer_key_bytes(p_))  // indexer keys
           + T * p_.Hs() * p_.Di * es                                        // qi
           + blocks * p_.Hs() * kv_per_sel * 2.0 * p_.Bs * p_.D * es         // selected K, V
           + 2.0 * T * p_.Hq * p_.D * es + T * p_.Hq * 4.0                   // q, out, lse
           + NQ * p_.Hs() * p_.k * 4.0;                                      // selections
  }
  bool has_baseline() const override { return true; }
  std::vector<std::pair<std::string, double>> counters_after_run(PreparedCase& p) const override {
    if (batch_.NQ() < 64) return {};
    return {{"distinct_blocks_per_64", distinct_blocks_per_64(batch_, p.download("block_idx"))}};
  }
  CaseData make_data(uint64_t seed, bool perf) const override {
    Rng rng(seed);
    const Pages pages = make_pages(batch_, p_.Bs, rng, p_.shuffle);
    const int64_t T = batch_.T(), NQ = batch_.NQ(), Hs = p_.Hs();
    CaseData d;
    d.slots.push_back(detail::random_input("q", p_.dtype, {T, p_.Hq, p_.D}, rng, 2.0, perf));
    d.slots.push_back(
        p_.correlated ? detail::random_walk_input("qi", p_.dtype, batch_, static_cast<int>(Hs), p_.Di, rng, 2.0, 0.999)
                      : detail::random_input("qi", p_.dtype, {T, Hs, p_.Di}, rng, 2.0, perf));
    d.slots.push_back(detail::cache_input("k_cache", batch_, pages, p_.Hkv, p_.D, p_.dtype, rng, 1.0, perf));
    d.slots.push_back(detail::cache_input("v_cache", batch_, pages, p_.Hkv, p_.D, p_.dtype, rng, 1.0, perf));
    detail::push_indexer_key_slots(d, p_, batch_, pages, rng, perf, p_.correlated);
    detail::push_index_slots(d, batch_, pages);
    d.slots.push_back(Slot::output("block_score", hal::DType::f32, {NQ, Hs, pages.max_blocks}, {}));
    d.slots.push_back(Slot::output("block_idx", hal::DType::i32, {NQ, Hs, p_.k}, {}));
    d.slots.push_back(Slot::output("block_cnt", hal::DType::i32, {NQ, Hs}, {}));
    d.slots.push_back(Slot::output("out", p_.dtype, {T, p_.Hq, p_.D}, Compare::out(p_.dtype)));
    d.slots.push_back(Slot::output("lse", hal::DType::f32, {T, p_.Hq}, Compare::lse(p_.dtype)));
    d.slots.push_back(Slot::output("dense_out", p_.dtype, {T, p_.Hq, p_.D}, {}));
    d.slots.push_back(Slot::output("dense_lse", hal::DType::f32, {T, p_.Hq}, {}));
    return d;
  }
  Launch bind(hal::Device& dev, const Bound& t) const override {
    const ops::IndexerScoreArgs ia = indexer_args(p_, batch_, t);
    const ops::BlockTopkArgs ta = topk_args(p_, batch_, t);
    const ops::SparseAttentionArgs sa = sparse_args(p_, batch_, t);
    Launch l1 = make_launch(dev, hal::OpId::indexer_score, ia, &ops::indexer_score);
    Launch l2 = make_launch(dev, hal::OpId::block_topk, ta, &ops::block_topk);
    Launch l3 = make_launch(dev, hal::OpId::sparse_block_attention, sa, &ops::sparse_block_attention);
    return {[l1, l2, l3] {
              for (const Launch* l : {&l1, &l2, &l3})
                if (std::string r = l->supports(); !r.empty()) return r;
              return std::string();
            },
            [&dev, ia, ta, l3] {
              ops::indexer_topk(dev, {ia, ta});  // as the model runs it: fused where the backend can
              l3.run();
            }};
  }
  Launch bind_baseline(hal::Device& dev, const Bound& t) const override {
    return make_launch(dev, hal::OpId::dense_attention, dense_args(p_, t, "dense_out", "dense_lse"),
                       &ops::dense_attention);
  }

 private:
  AttnParams p_;
  Batch batch_;
};

}  // namespace

std::unique_ptr<Case> sparse_attention_case(const AttnParams& p) { return std::make_unique<SparseCase>(p); }
std::unique_ptr<Case> dense_attention_case(const AttnParams& p) { return std::make_unique<DenseCase>(p); }
std::unique_ptr<Case> msa_layer_case(const AttnParams& p) { return std::make_unique<MsaLayerCase>(p); }

}  // namespace msa::cases
