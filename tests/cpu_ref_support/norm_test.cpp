// rms_norm (plain and gemma) and layer_norm against hand formulas.
#include "tests/cpu_ref_support/test_util.h"

namespace msa::test {
namespace {

TEST(CpuRefRmsNorm, HandWorkedPlain) {
  RefDevice d;
  ops::RmsNormArgs a;
  a.x = d.make(DType::f32, {1, 2}, {3, 4});
  a.w = d.make(DType::f32, {2}, {1, 2});
  a.eps = 0;
  a.kind = ops::NormKind::plain;
  a.y = d.out(DType::f32, {1, 2});
  d.run(hal::OpId::rms_norm, a);
  const double rms = std::sqrt(12.5);  // mean(9, 16)
  auto y = d.get(a.y);
  EXPECT_FLOAT_EQ(y[0], 3 / rms);
  EXPECT_FLOAT_EQ(y[1], 2 * 4 / rms);
}

TEST(CpuRefRmsNorm, GemmaEqualsPlainWithOnePlusW) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t M = 5, N = 64;
    auto xv = random_values(M * N, dt, 11, -3, 3);
    auto wv = random_values(N, DType::f32, 12, -0.5f, 0.5f);
    std::vector<float> w1(N);
    for (int64_t n = 0; n < N; ++n) w1[n] = 1.0f + wv[n];  // rounded to f32: within 2^-24 of gemma's factor
    ops::RmsNormArgs g, p;
    g.x = p.x = d.make(dt, {M, N}, xv);
    g.w = d.make(DType::f32, {N}, wv);
    p.w = d.make(DType::f32, {N}, w1);
    g.kind = ops::NormKind::gemma;
    p.kind = ops::NormKind::plain;
    g.y = d.out(dt, {M, N});
    p.y = d.out(dt, {M, N});
    d.run(hal::OpId::rms_norm, g);
    d.run(hal::OpId::rms_norm, p);
    auto yg = d.get(g.y), yp = d.get(p.y);
    for (int64_t m = 0; m < M; ++m) {
      double ss = 0;
      for (int64_t n = 0; n < N; ++n) ss += double(xv[m * N + n]) * xv[m * N + n];
      const double inv = 1 / std::sqrt(ss / N + 1e-6);
      for (int64_t n = 0; n < N; ++n) {
        const double ref = xv[m * N + n] * inv * (1.0 + wv[n]);
        EXPECT_NEAR(yg[m * N + n], ref, std::abs(ref) * round_tol(dt) + 1e-7) << hal::dtype_name(dt);
        EXPECT_NEAR(yp[m * N + n], yg[m * N + n], std::abs(ref) * 2 * round_tol(dt) + 1e-7);
      }
    }
  }
}

TEST(CpuRefRmsNorm, PerHeadRowsOfRank3) {
  // QK-norm: x [T][H][D] with w [D] normalises every (t, h) row separately.
  RefDevice d;
  auto xv = random_values(2 * 3 * 4, DType::f32, 13);
  ops::RmsNormArgs a;
  a.x = d.make(DType::f32, {2, 3, 4}, xv);
  a.w = d.make(DType::f32, {4}, {0, 0, 0, 0});
  a.eps = 0;
  a.y = d.out(DType::f32, {2, 3, 4});
  d.run(hal::OpId::rms_norm, a);  // gemma, w = 0: unit RMS rows
  auto y = d.get(a.y);
  for (int r = 0; r < 6; ++r) {
    double ss = 0;
    for (int i = 0; i < 4; ++i) ss += double(y[r * 4 + i]) * y[r * 4 + i];
    EXPECT_NEAR(ss / 4, 1.0, 1e-6);
  }
}

TEST(CpuRefLayerNorm, HandWorkedWithBias) {
  RefDevice d;
  ops::LayerNormArgs a;
  a.x = d.make(DType::f32, {1, 4}, {1, 2, 3, 4});
  a.w = d.make(DType::f32, {4}, {1, 2, 1, 1});
  a.b = d.make(DType::f32, {4}, {0, 0, 1, 0});
  a.eps = 0;
  a.y = d.out(DType::f32, {1, 4});
  d.run(hal::OpId::layer_norm, a);
  const double s = 1 / std::sqrt(1.25);  // mean 2.5, biased variance 1.25
  auto y = d.get(a.y);
  EXPECT_FLOAT_EQ(y[0], -1.5 * s);
  EXPECT_FLOAT_EQ(y[1], 2 * -0.5 * s);
  EXPECT_FLOAT_EQ(y[2], 0.5 * s + 1);
  EXPECT_FLOAT_EQ(y[3], 1.5 * s);
}

TEST(CpuRefLayerNorm, RowsHaveZeroMeanUnitVariance) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t M = 3, N = 80;
    ops::LayerNormArgs a;
    a.x = d.make(dt, {M, N}, random_values(M * N, dt, 21, 2, 5));  // offset mean
    a.w = d.make(dt, {N}, std::vector<float>(N, 1.0f));
    a.eps = 0;
    a.y = d.out(dt, {M, N});
    d.run(hal::OpId::layer_norm, a);
    auto y = d.get(a.y);
    for (int64_t m = 0; m < M; ++m) {
      double s = 0, s2 = 0;
      for (int64_t n = 0; n < N; ++n) s += y[m * N + n], s2 += double(y[m * N + n]) * y[m * N + n];
      EXPECT_NEAR(s / N, 0.0, 10 * round_tol(dt)) << hal::dtype_name(dt);
      EXPECT_NEAR(s2 / N, 1.0, 10 * round_tol(dt)) << hal::dtype_name(dt);
    }
  }
}

TEST(CpuRefNorms, InPlaceMatchesOutOfPlace) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t M = 4, N = 48;
    auto xv = random_values(M * N, dt, 91, -2, 2);
    ops::RmsNormArgs r;
    r.x = d.make(dt, {M, N}, xv);
    r.w = d.make(dt, {N}, random_values(N, dt, 92));
    r.y = d.out(dt, {M, N});
    d.run(hal::OpId::rms_norm, r);
    const auto ry = d.get(r.y);
    r.y = r.x;
    d.run(hal::OpId::rms_norm, r);
    EXPECT_EQ(d.get(r.x), ry) << hal::dtype_name(dt);
    ops::LayerNormArgs l;
    l.x = d.make(dt, {M, N}, xv);
    l.w = d.make(dt, {N}, random_values(N, dt, 93));
    l.b = d.make(dt, {N}, random_values(N, dt, 94));
    l.y = d.out(dt, {M, N});
    d.run(hal::OpId::layer_norm, l);
    const auto ly = d.get(l.y);
    l.y = l.x;
    d.run(hal::OpId::layer_norm, l);
    EXPECT_EQ(d.get(l.x), ly) << hal::dtype_name(dt);
  }
}

}  // namespace
}  // namespace msa::test
