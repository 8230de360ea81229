// dense_attention_backward and patch_attention_3d_backward against explicit Jacobians:
// per query, the matrices d out / d q, d out / d k_s and d out / d v_s of the softmax
// attention are built entry by entry in double and multiplied by dout, so no line of the
// reference's chain rule is reused. patch_attention_3d_backward is also checked against
// finite differences of its forward op.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/training/training_util.h"

namespace msa::training_test {
namespace {

// Gradients of dout . out for one query q over keys/values kk, vv ([n][D]), accumulated
// into gq [D], gk / gv [n][D], from the explicit Jacobians.
void jacobian_grads(const std::vector<double>& q, const std::vector<std::vector<double>>& kk,
                    const std::vector<std::vector<double>>& vv, const std::vector<double>& dout, double scale,
                    std::vector<double>& gq, std::vector<std::vector<double>>& gk,
                    std::vector<std::vector<double>>& gv) {
  const size_t n = kk.size(), D = q.size();
  std::vector<double> p(n);
  double m = -INFINITY, sum = 0;
  for (size_t s = 0; s < n; ++s) {
    double l = 0;
    for (size_t d = 0; d < D; ++d) l += q[d] * kk[s][d];
    p[s] = scale * l;
    m = std::max(m, p[s]);
  }
  for (double& x : p) sum += x = std::exp(x - m);
  for (double& x : p) x /= sum;
  // dp_s / dl_r = p_s (delta_sr - p_r); dl_r / dq_j = scale k_rj; dl_r / dk_rj = scale q_j.
  const auto dp_dl = [&](size_t s, size_t r) { return p[s] * ((s == r ? 1.0 : 0.0) - p[r]); };
  for (size_t i = 0; i < D; ++i)      // out_i
    for (size_t j = 0; j < D; ++j) {  // d out_i / d q_j and d out_i / d k_rj
      double jq = 0;
      for (size_t s = 0; s < n; ++s)
        for (size_t r = 0; r < n; ++r) {
          jq += vv[s][i] * dp_dl(s, r) * scale * kk[r][j];
          gk[r][j] += dout[i] * vv[s][i] * dp_dl(s, r) * scale * q[j];
        }
      gq[j] += dout[i] * jq;
    }
  for (size_t r = 0; r < n; ++r)
    for (size_t i = 0; i < D; ++i) gv[r][i] += dout[i] * p[r];  // d out_i / d v_ri = p_r
}

TEST(ExplicitJacobian, DenseAttentionBackward) {
  Ref r;
  // Two sequences (GQA 2): a chunk of 2 queries over 5 cached tokens, a prefill of 3.
  PagedCase c = make_paged_case({2, 3}, {5, 3}, 2, 2, 1, 3, 41);
  const Forward f = paged_forward(r, c, false, c.q, c.k, c.v);
  const Grads g = paged_backward(r, c, false, f);
  const double scale = 1.0 / std::sqrt(3.0f);
  std::vector<double> want_dk(c.k.size(), 0.0), want_dv(c.v.size(), 0.0);
  const auto slot = [&](int b, int s, int h) {
    return ((static_cast<size_t>(c.L.page(b, s / c.L.Bs)) * c.Hkv + h) * c.L.Bs + s % c.L.Bs) * c.D;
  };
  for (int64_t t = 0; t < c.L.T; ++t) {
    const int b = c.L.tok_seq[t];
    const int64_t pos = c.L.tok_pos[t];
    for (int h = 0; h < c.Hq; ++h) {
      const int kvh = h / (c.Hq / c.Hkv);
      std::vector<std::vector<double>> kk, vv;
      for (int s = 0; s <= pos; ++s) {
        kk.emplace_back(c.k.begin() + slot(b, s, kvh), c.k.begin() + slot(b, s, kvh) + c.D);
        vv.emplace_back(c.v.begin() + slot(b, s, kvh), c.v.begin() + slot(b, s, kvh) + c.D);
      }
      const size_t row = (t * c.Hq + h) * c.D;
      const std::vector<double> q(c.q.begin() + row, c.q.begin() + row + c.D),
          dout(c.dout.begin() + row, c.dout.begin() + row + c.D);
      std::vector<double> gq(c.D, 0.0);
      std::vector<std::vector<double>> gk(kk.size(), std::vector<double>(c.D, 0.0)), gv = gk;
      jacobian_grads(q, kk, vv, dout, scale, gq, gk, gv);
      for (int d = 0; d < c.D; ++d) EXPECT_NEAR(g.dq[row + d], gq[d], 2e-6) << "dq row " << t << "," << h;
      for (size_t s = 0; s < kk.size(); ++s)
        for (int d = 0; d < c.D; ++d) {
          want_dk[slot(b, static_cast<int>(s), kvh) + d] += gk[s][d];
          want_dv[slot(b, static_cast<int>(s), kvh) + d] += gv[s][d];
        }
    }
  }
  for (size_t i = 0; i < want_dk.size(); ++i) {
    EXPECT_NEAR(g.dk[i], want_dk[i], 2e-6) << "dk_cache " << i;
    EXPECT_NEAR(g.dv[i], want_dv[i], 2e-6) << "dv_cache " << i;
  }
}

// A 2x2x2 toy worked by hand: one query q = (1, 0) over k = {(0, 0), (ln 3 / s, 0)} with
// scale s: p = (1/4, 3/4); v = {(1, 0), (0, 1)}, out = (1/4, 3/4), dout = (1, 0):
// dv = {(1/4, 0), (3/4, 0)}; delta = 1/4, dp = (1, 0), ds = (3/16, -3/16);
// dq = s * (3/16 k_0 - 3/16 k_1) = (-3/16 ln 3, 0); dk_0 = (3/16 s, 0), dk_1 = (-3/16 s, 0).
TEST(ExplicitJacobian, HandWorkedTwoTokens) {
  Ref r;
  PagedCase c = make_paged_case({1}, {2}, 2, 1, 1, 2, 51);
  const double s = 1.0 / std::sqrt(2.0f);
  const int page = c.L.page(0, 0);
  c.q = {1, 0};
  c.dout = {1, 0};
  const float k1 = static_cast<float>(std::log(3.0) / s);
  for (auto* v : {&c.k, &c.v}) std::fill(v->begin(), v->end(), kNaN);
  const size_t base = static_cast<size_t>(page) * 2 * 2;
  c.k[base + 0] = 0, c.k[base + 1] = 0, c.k[base + 2] = k1, c.k[base + 3] = 0;
  c.v[base + 0] = 1, c.v[base + 1] = 0, c.v[base + 2] = 0, c.v[base + 3] = 1;
  const Forward f = paged_forward(r, c, false, c.q, c.k, c.v);
  const double p0 = 1.0 / (1.0 + std::exp(s * k1)), p1 = 1 - p0;  // 1/4, 3/4 up to k1's rounding
  ASSERT_NEAR(p0, 0.25, 1e-6);
  const Grads g = paged_backward(r, c, false, f);
  const double ds0 = p0 * (1 - p0), ds1 = -p0 * p1 * 1.0;  // p_s (dp_s - delta), delta = p0
  EXPECT_NEAR(g.dv[base + 0], p0, 1e-6);
  EXPECT_NEAR(g.dv[base + 2], p1, 1e-6);
  EXPECT_EQ(g.dv[base + 1], 0.0f);
  EXPECT_NEAR(g.dq[0], s * ds1 * k1, 1e-6);
  EXPECT_NEAR(g.dq[0], -3.0 / 16 * std::log(3.0), 1e-5);
  EXPECT_EQ(g.dq[1], 0.0f);
  EXPECT_NEAR(g.dk[base + 0], s * ds0, 1e-6);
  EXPECT_NEAR(g.dk[base + 2], -3.0 / 16 * s, 1e-5);
  for (size_t i = 0; i < c.k.size(); ++i)
    if (i < base || i >= base + 4) EXPECT_EQ(g.dk[i], 0.0f) << "slot " << i << " was never attended";
}

TEST(PatchAttention3dBackward, MatchesFiniteDifferencesOfTheForward) {
  Ref r;
  const int N = 2 * 1 * 2 + 3 * 2 * 1, H = 2, D = 4;  // a 2-frame video item and a 3-frame one
  const std::vector<int32_t> items = {2, 1, 2, 3, 2, 1};
  const std::vector<float> q = cpu_ref_test::random_values(N * H * D, DType::f32, 61, -1.5f, 1.5f),
                           k = cpu_ref_test::random_values(N * H * D, DType::f32, 62, -1.5f, 1.5f),
                           v = cpu_ref_test::random_values(N * H * D, DType::f32, 63),
                           dout = cpu_ref_test::random_values(N * H * D, DType::f32, 64);
  const auto forward = [&](const std::vector<float>& qq, const std::vector<float>& kk, const std::vector<float>& vv) {
    ops::PatchAttention3dArgs a;
    a.q = r.make(DType::f32, {N, H, D}, qq), a.k = r.make(DType::f32, {N, H, D}, kk),
    a.v = r.make(DType::f32, {N, H, D}, vv);
    a.items = r.make_i32({2, 3}, items);
    a.window = 2;
    a.out = r.out(DType::f32, {N, H, D}), a.lse = r.out(DType::f32, {N, H});
    ops::patch_attention_3d(r.device(), a);
    return Forward{r.get(a.out), r.get(a.lse)};
  };
  const Forward f = forward(q, k, v);
  ops::PatchAttention3dBackwardArgs a;
  a.dout = r.make(DType::f32, {N, H, D}, dout);
  a.q = r.make(DType::f32, {N, H, D}, q), a.k = r.make(DType::f32, {N, H, D}, k),
  a.v = r.make(DType::f32, {N, H, D}, v);
  a.items = r.make_i32({2, 3}, items);
  a.window = 2;
  a.out = r.make(DType::f32, {N, H, D}, f.out), a.lse = r.make(DType::f32, {N, H}, f.lse);
  a.dq = r.out(DType::f32, {N, H, D}), a.dk = r.out(DType::f32, {N, H, D}), a.dv = r.out(DType::f32, {N, H, D});
  ops::patch_attention_3d_backward(r.device(), a);
  const auto lq = [&](const std::vector<float>& x) { return loss_of(dout, forward(x, k, v).out); };
  const auto lk = [&](const std::vector<float>& x) { return loss_of(dout, forward(q, x, v).out); };
  const auto lv = [&](const std::vector<float>& x) { return loss_of(dout, forward(q, k, x).out); };
  EXPECT_GT(expect_gradient(lq, q, r.get(a.dq), 2e-4, "dq"), 0);
  EXPECT_GT(expect_gradient(lk, k, r.get(a.dk), 2e-4, "dk"), 0);
  EXPECT_GT(expect_gradient(lv, v, r.get(a.dv), 2e-4, "dv"), 0);
}

}  // namespace
}  // namespace msa::training_test
