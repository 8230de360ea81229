// indexer_kl on cpu-ref: kl against a test-local computation (the target as the mean of
// per-head softmaxes, never using lse), gradients against finite differences of the op's
// own kl, a student equal to the target (kl = 0), the dkl weighting, empty sets, stages
// sparse and dense, shared mode, Qb > 1, NaN in slack slots.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/training/training_util.h"

namespace msa::training_test {
namespace {

// An indexer on top of a paged case: qi [T][Hs][Di], ki [P][Bs][Di] (NaN in slack slots).
struct KlCase {
  PagedCase c;
  int Di = 4;
  std::vector<float> qi, ki, dkl;
  float scale_i = 0.0f;
};

KlCase make_kl_case(PagedCase c, uint64_t seed) {
  KlCase k;
  k.c = std::move(c);
  std::vector<std::vector<float>> logical;
  k.qi = cpu_ref_test::random_values(static_cast<size_t>(k.c.L.T) * k.c.Hs() * k.Di, DType::f32, seed, -2.f, 2.f);
  k.ki = cpu_ref_test::paged_values(k.c.L, 1, k.Di, DType::f32, seed + 1, logical, -2.f, 2.f);
  k.dkl = cpu_ref_test::random_values(static_cast<size_t>(k.c.L.T) * k.c.Hs(), DType::f32, seed + 2, 0.5f, 2.f);
  return k;
}

struct KlOut {
  std::vector<float> kl, dqi, dki;
};

KlOut run_kl(Ref& r, const KlCase& k, bool sparse, const std::vector<float>& lse, const std::vector<float>& qi,
             const std::vector<float>& ki, bool with_dkl = true) {
  const PagedCase& c = k.c;
  ops::IndexerKlArgs a;
  a.qi = r.make(DType::f32, {c.L.T, c.Hs(), k.Di}, qi);
  a.ki_cache = r.make(DType::f32, {c.L.P, c.L.Bs, k.Di}, ki);
  a.q = r.make(c.t, c.q_shape(), c.q);
  a.k_cache = r.make(c.t, c.kv_shape(), c.k);
  a.lse = r.make(DType::f32, {c.L.T, c.Hq}, lse);
  a.block_table = r.make_i32({c.L.B, c.L.max_blocks}, c.L.block_table);
  a.kv_len = r.make_i32({c.L.B}, c.L.kv_len);
  a.cu_q = r.make_i32({c.L.B + 1}, c.L.cu_q);
  a.stage = sparse ? ops::KlStage::sparse : ops::KlStage::dense;
  if (sparse) {
    a.block_idx = r.make_i32({c.qbs.nq(), c.Hs(), c.K}, c.block_idx);
    a.Qb = c.Qb;
    a.NQ = c.qbs.nq();
  }
  if (with_dkl) a.dkl = r.make(DType::f32, {c.L.T, c.Hs()}, k.dkl);
  a.mode = c.mode;
  a.scale_i = k.scale_i;
  a.kl = r.out(DType::f32, {c.L.T, c.Hs()});
  a.dqi = r.out(DType::f32, {c.L.T, c.Hs(), k.Di});
  a.dki_cache = r.out(DType::f32, {c.L.P, c.L.Bs, k.Di});
  ops::indexer_kl(r.device(), a);
  return {r.get(a.kl), r.get(a.dqi), r.get(a.dki_cache)};
}

// The test's own kl of query t, selection head g: the token set from the layout and the
// selection, target = mean over the group's heads of softmax(scale q.k) computed from
// scratch, student = softmax(scale_i qi.ki).
double expected_kl(const KlCase& k, bool sparse, int64_t t, int g) {
  const PagedCase& c = k.c;
  const int b = c.L.tok_seq[t];
  const int64_t pos = c.L.tok_pos[t];
  std::vector<int> set;
  for (int s = 0; s < c.L.kv_len[b] && s <= pos; ++s) {
    bool in = !sparse;
    for (int j = 0; j < c.K && sparse; ++j) in |= c.block_idx[(c.qbs.qb_of[t] * c.Hs() + g) * c.K + j] == s / c.L.Bs;
    if (in) set.push_back(s);
  }
  if (set.empty()) return 0.0;
  const int G = c.Hq / c.Hkv;
  const bool shared = c.mode == ops::SelectionMode::shared;
  const int h0 = shared ? 0 : g * G, nh = shared ? c.Hq : G;
  const double scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.D)));
  const auto softmax = [](std::vector<double> l) {
    double m = -INFINITY, sum = 0;
    for (double x : l) m = std::max(m, x);
    for (double& x : l) sum += x = std::exp(x - m);
    for (double& x : l) x /= sum;
    return l;
  };
  std::vector<double> p(set.size(), 0.0);
  for (int h = h0; h < h0 + nh; ++h) {
    std::vector<double> l;
    for (int s : set) {
      const size_t ko = ((static_cast<size_t>(c.L.page(b, s / c.L.Bs)) * c.Hkv + h / G) * c.L.Bs + s % c.L.Bs) * c.D;
      double dot = 0;
      for (int d = 0; d < c.D; ++d) dot += static_cast<double>(c.q[(t * c.Hq + h) * c.D + d]) * c.k[ko + d];
      l.push_back(scale * dot);
    }
    const auto ph = softmax(l);
    for (size_t i = 0; i < p.size(); ++i) p[i] += ph[i] / nh;
  }
  const double si = k.scale_i != 0 ? k.scale_i : static_cast<float>(1.0 / std::sqrt(static_cast<double>(k.Di)));
  std::vector<double> l;
  for (int s : set) {
    const size_t ko = (static_cast<size_t>(c.L.page(b, s / c.L.Bs)) * c.L.Bs + s % c.L.Bs) * k.Di;
    double dot = 0;
    for (int d = 0; d < k.Di; ++d) dot += static_cast<double>(k.qi[(t * c.Hs() + g) * k.Di + d]) * k.ki[ko + d];
    l.push_back(si * dot);
  }
  const auto u = softmax(l);
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) kl += p[i] * (std::log(p[i]) - std::log(u[i]));
  return kl;
}

class IndexerKl : public ::testing::TestWithParam<Variant> {};

TEST_P(IndexerKl, MatchesItsDefinitionAndFiniteDifferences) {
  const Variant& var = GetParam();
  Ref r;
  PagedCase c = make_paged_case({5, 3, 0}, {5, 9, 4}, 4, 4, 2, 4, 71);
  if (var.sparse) select_random(c, var.Qb, 3, var.mode, 72, var.empty_every);
  c.mode = var.mode;
  const Forward f = paged_forward(r, c, var.sparse, c.q, c.k, c.v);
  KlCase k = make_kl_case(c, 73);
  const KlOut o = run_kl(r, k, var.sparse, f.lse, k.qi, k.ki);
  int zero_sets = 0;
  for (int64_t t = 0; t < c.L.T; ++t)
    for (int g = 0; g < c.Hs(); ++g) {
      const double want = expected_kl(k, var.sparse, t, g);
      const float got = o.kl[t * c.Hs() + g];
      EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << "kl[" << t << "][" << g << "]";
      EXPECT_GE(got, -1e-6f);
      zero_sets += want == 0.0;
    }
  if (var.empty_every > 0) EXPECT_GT(zero_sets, 0);
  const auto loss = [&](const KlOut& x) {
    double s = 0;
    for (size_t i = 0; i < x.kl.size(); ++i) s += static_cast<double>(k.dkl[i]) * x.kl[i];
    return s;
  };
  const auto lq = [&](const std::vector<float>& qi) { return loss(run_kl(r, k, var.sparse, f.lse, qi, k.ki)); };
  const auto lk = [&](const std::vector<float>& ki) { return loss(run_kl(r, k, var.sparse, f.lse, k.qi, ki)); };
  EXPECT_GT(expect_gradient(lq, k.qi, o.dqi, 2e-4, "dqi"), 0);
  EXPECT_GT(expect_gradient(lk, k.ki, o.dki, 2e-4, "dki_cache"), 0);
  // Bitwise reproducible.
  const KlOut again = run_kl(r, k, var.sparse, f.lse, k.qi, k.ki);
  EXPECT_EQ(again.dki, o.dki);
  EXPECT_EQ(again.dqi, o.dqi);
}

INSTANTIATE_TEST_SUITE_P(Variants, IndexerKl,
                         ::testing::Values(Variant{"dense", false, 1, ops::SelectionMode::per_kv_head, 0},
                                           Variant{"dense_shared", false, 1, ops::SelectionMode::shared, 0},
                                           Variant{"sparse", true, 1, ops::SelectionMode::per_kv_head, 0},
                                           Variant{"sparse_Qb4_empty_sets", true, 4, ops::SelectionMode::per_kv_head,
                                                   2},
                                           Variant{"sparse_shared_Qb2", true, 2, ops::SelectionMode::shared, 0}),
                         [](const auto& info) { return std::string(info.param.name); });

// A student that reproduces the target (one head per group, qi = q, ki = k, scale_i =
// scale) has kl = 0 and no gradient; doubling dkl doubles the gradients.
TEST(IndexerKl, StudentEqualToTargetAndDklWeighting) {
  Ref r;
  // One query head and one KV head, so the main keys have the layout of ki_cache.
  PagedCase c1 = make_paged_case({4, 2}, {6, 5}, 2, 1, 1, 4, 83);
  const Forward f1 = paged_forward(r, c1, false, c1.q, c1.k, c1.v);
  KlCase k1 = make_kl_case(c1, 84);
  k1.scale_i = static_cast<float>(1.0 / std::sqrt(4.0));
  k1.qi = c1.q;
  k1.ki = c1.k;  // [P][1][Bs][D] is [P][Bs][Di]
  const KlOut o = run_kl(r, k1, false, f1.lse, k1.qi, k1.ki, false);
  for (float x : o.kl) EXPECT_NEAR(x, 0.0f, 1e-6);
  for (float x : o.dqi) EXPECT_NEAR(x, 0.0f, 1e-6);
  for (size_t i = 0; i < o.dki.size(); ++i)
    if (!std::isnan(k1.ki[i]))
      EXPECT_NEAR(o.dki[i], 0.0f, 1e-6);
    else
      EXPECT_EQ(o.dki[i], 0.0f);
  // dkl = 2 everywhere gives twice the gradients of the default (all ones).
  PagedCase c = make_paged_case({4, 2}, {6, 5}, 2, 2, 2, 4, 81);
  const Forward f = paged_forward(r, c, false, c.q, c.k, c.v);
  KlCase k2 = make_kl_case(c, 85);
  const KlOut ones = run_kl(r, k2, false, f.lse, k2.qi, k2.ki, false);
  std::fill(k2.dkl.begin(), k2.dkl.end(), 2.0f);
  const KlOut twos = run_kl(r, k2, false, f.lse, k2.qi, k2.ki, true);
  EXPECT_EQ(ones.kl, twos.kl);
  for (size_t i = 0; i < ones.dqi.size(); ++i) EXPECT_EQ(2 * ones.dqi[i], twos.dqi[i]);
  for (size_t i = 0; i < ones.dki.size(); ++i) EXPECT_EQ(2 * ones.dki[i], twos.dki[i]);
}

}  // namespace
}  // namespace msa::training_test
