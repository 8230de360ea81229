// swiglu, gelu, add: known values and a second computation over the rounded inputs.
#include "tests/cpu_ref_support/test_util.h"

namespace msa::test {
namespace {

TEST(CpuRefGelu, KnownValuesErfForm) {
  RefDevice d;
  ops::GeluArgs a;
  a.x = d.make(DType::f32, {5}, {0, 1, -1, 3, -10});
  a.y = d.out(DType::f32, {5});
  d.run(hal::OpId::gelu, a);
  auto y = d.get(a.y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_FLOAT_EQ(y[1], 0.8413447460685429f);    // Phi(1)
  EXPECT_FLOAT_EQ(y[2], -0.15865525393145707f);  // -Phi(-1)
  EXPECT_FLOAT_EQ(y[3], 2.9959502409463788f);    // 3 * Phi(3); the tanh form gives 2.99636
  EXPECT_NEAR(y[4], 0.0f, 1e-20);
}

TEST(CpuRefSwiglu, KnownValues) {
  RefDevice d;
  ops::SwigluArgs a;
  a.gate = d.make(DType::f32, {1, 4}, {1, 2, 0, -100});
  a.up = d.make(DType::f32, {1, 4}, {1, 3, 5, 2});
  a.y = d.out(DType::f32, {1, 4});
  d.run(hal::OpId::swiglu, a);
  auto y = d.get(a.y);
  EXPECT_FLOAT_EQ(y[0], 0.7310585786300049f);  // sigmoid(1)
  EXPECT_FLOAT_EQ(y[1], 3 * 2 / (1 + std::exp(-2.0)));
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_NEAR(y[3], 0.0f, 1e-30);
  EXPECT_FALSE(std::isnan(y[3]));
}

TEST(CpuRefElementwise, RandomAgainstSecondComputation) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t M = 7, N = 33;
    auto gv = random_values(M * N, dt, 51, -6, 6), uv = random_values(M * N, dt, 52, -2, 2);
    ops::SwigluArgs s;
    s.gate = d.make(dt, {M, N}, gv);
    s.up = d.make(dt, {M, N}, uv);
    s.y = d.out(dt, {M, N});
    d.run(hal::OpId::swiglu, s);
    ops::GeluArgs g;
    g.x = s.gate;
    g.y = d.out(dt, {M, N});
    d.run(hal::OpId::gelu, g);
    ops::AddArgs ad;
    ad.a = s.gate;
    ad.b = s.up;
    ad.y = d.out(dt, {M, N});
    d.run(hal::OpId::add, ad);
    auto ys = d.get(s.y), yg = d.get(g.y), ya = d.get(ad.y);
    for (int64_t i = 0; i < M * N; ++i) {
      const double x = gv[i];
      const double sig = 0.5 * (1 + std::tanh(x / 2));  // sigmoid by another route
      const double swi = x * sig * uv[i];
      const double ge = x * 0.5 * std::erfc(-x / std::sqrt(2.0));  // x * Phi(x)
      EXPECT_NEAR(ys[i], swi, std::abs(swi) * round_tol(dt) + 1e-6) << hal::dtype_name(dt);
      EXPECT_NEAR(yg[i], ge, std::abs(ge) * round_tol(dt) + 1e-6) << hal::dtype_name(dt);
      // a + b in f64, rounded once to dt.
      EXPECT_EQ(ya[i], hal::round_to(dt, static_cast<float>(double(gv[i]) + uv[i]))) << hal::dtype_name(dt);
    }
  }
}

TEST(CpuRefAdd, MixedRank3) {
  RefDevice d;
  ops::AddArgs a;
  a.a = d.make(DType::f32, {1, 2, 2}, {1, 2, 3, 4});
  a.b = d.make(DType::f32, {1, 2, 2}, {0.5f, -2, 1e30f, -4});
  a.y = d.out(DType::f32, {1, 2, 2});
  d.run(hal::OpId::add, a);
  EXPECT_EQ(d.get(a.y), (std::vector<float>{1.5f, 0, 1e30f, 0}));
}

}  // namespace
}  // namespace msa::test
