// matmul against a naive loop over the same (rounded) inputs.
#include "tests/cpu_ref_support/test_util.h"

namespace msa::test {
namespace {

void check_matmul(DType dt, int64_t M, int64_t K, int64_t N, bool with_bias, bool rank3) {
  RefDevice d;
  auto xv = random_values(M * K, dt, 1), wv = random_values(N * K, dt, 2), bv = random_values(N, dt, 3);
  ops::MatmulArgs a;
  // rank3: x as [2][M/2][K], y as [2][M/2][N]; the kernel treats leading dims as rows.
  a.x = rank3 ? d.make(dt, {2, M / 2, K}, xv) : d.make(dt, {M, K}, xv);
  a.w = d.make(dt, {N, K}, wv);
  if (with_bias) a.bias = d.make(dt, {N}, bv);
  a.y = rank3 ? d.out(dt, {2, M / 2, N}) : d.out(dt, {M, N});
  d.run(hal::OpId::matmul, a);
  auto y = d.get(a.y);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = with_bias ? bv[n] : 0.0, mag = std::abs(ref);
      for (int64_t k = 0; k < K; ++k) {
        ref += static_cast<double>(xv[m * K + k]) * wv[n * K + k];
        mag += std::abs(static_cast<double>(xv[m * K + k]) * wv[n * K + k]);
      }
      EXPECT_NEAR(y[m * N + n], ref, mag * 1e-6 + std::abs(ref) * round_tol(dt))
          << hal::dtype_name(dt) << " m=" << m << " n=" << n;
    }
}

TEST(CpuRefMatmul, MatchesNaiveLoopWithBias) {
  for (DType dt : kActDTypes) check_matmul(dt, 6, 37, 5, true, false);
}

TEST(CpuRefMatmul, MatchesNaiveLoopWithoutBias) {
  for (DType dt : kActDTypes) check_matmul(dt, 4, 16, 9, false, false);
}

TEST(CpuRefMatmul, LeadingDimsAreRows) { check_matmul(DType::f32, 6, 8, 3, true, true); }

TEST(CpuRefMatmul, HandWorked) {
  RefDevice d;
  ops::MatmulArgs a;
  a.x = d.make(DType::f32, {1, 2}, {1, 2});
  a.w = d.make(DType::f32, {2, 2}, {3, 4, -5, 6});
  a.bias = d.make(DType::f32, {2}, {0.5f, -1});
  a.y = d.out(DType::f32, {1, 2});
  d.run(hal::OpId::matmul, a);
  EXPECT_EQ(d.get(a.y), (std::vector<float>{11.5f, 6.0f}));
}

TEST(CpuRefMatmul, EmptyRowsWriteNothing) {
  RefDevice d;
  ops::MatmulArgs a;
  a.x = d.make(DType::f32, {0, 4}, {});
  a.w = d.make(DType::f32, {3, 4}, random_values(12, DType::f32, 4));
  a.y = d.out(DType::f32, {0, 3});
  d.run(hal::OpId::matmul, a);
  EXPECT_TRUE(d.get(a.y).empty());
}

}  // namespace
}  // namespace msa::test
