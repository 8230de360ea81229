// rope and rope_3d: hand-computed angles, norm preservation, pass-through dims, in place.
#include "tests/cpu_ref_support/test_util.h"

namespace msa::test {
namespace {

TEST(CpuRefRope, HandComputedPartialRotation) {
  // T=2, H=1, D=8, rotary_dim=4: pairs (0,2) and (1,3); inv_freq = {1, theta^-0.5}.
  RefDevice d;
  const std::vector<float> xv = {0.5f, -1, 2, 0.25f, 7, 8, 9, 10, 1, 2, 3, 4, 5, 6, 7, 8};
  ops::RopeArgs a;
  a.x = d.make(DType::f32, {2, 1, 8}, xv);
  a.pos = d.make_i32({2}, {5, 0});
  a.rotary_dim = 4;
  a.theta = 1e4f;
  a.y = d.out(DType::f32, {2, 1, 8});
  d.run(hal::OpId::rope, a);
  auto y = d.get(a.y);
  const double ang0 = 5.0, ang1 = 5.0 * 0.01;  // 1e4^(-2/4) = 0.01
  EXPECT_NEAR(y[0], 0.5 * std::cos(ang0) - 2 * std::sin(ang0), 1e-6);
  EXPECT_NEAR(y[2], 2 * std::cos(ang0) + 0.5 * std::sin(ang0), 1e-6);
  EXPECT_NEAR(y[1], -1 * std::cos(ang1) - 0.25 * std::sin(ang1), 1e-6);
  EXPECT_NEAR(y[3], 0.25 * std::cos(ang1) + -1 * std::sin(ang1), 1e-6);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(y[i], xv[i]) << "pass-through dim " << i;
  for (int i = 8; i < 16; ++i) EXPECT_EQ(y[i], xv[i]) << "position 0 is the identity";
}

TEST(CpuRefRope, PreservesPairNormsAndInPlaceMatches) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t T = 4, H = 3, D = 16, rd = 8;
    auto xv = random_values(T * H * D, dt, 31);
    const std::vector<int32_t> pos = {0, 7, 1000, 123456};
    ops::RopeArgs a;
    a.x = d.make(dt, {T, H, D}, xv);
    a.pos = d.make_i32({T}, pos);
    a.rotary_dim = rd;
    a.theta = 5e6f;
    a.y = d.out(dt, {T, H, D});
    d.run(hal::OpId::rope, a);
    auto y = d.get(a.y);
    ops::RopeArgs in = a;
    in.y = in.x;  // in place
    d.run(hal::OpId::rope, in);
    EXPECT_EQ(d.get(in.x), y) << "in place differs from out of place, " << hal::dtype_name(dt);
    for (int64_t r = 0; r < T * H; ++r) {
      for (int64_t j = 0; j < rd / 2; ++j) {
        const double n0 = std::hypot(xv[r * D + j], xv[r * D + j + rd / 2]);
        const double n1 = std::hypot(y[r * D + j], y[r * D + j + rd / 2]);
        EXPECT_NEAR(n1, n0, n0 * 2 * round_tol(dt) + 1e-7);
      }
      for (int64_t i = rd; i < D; ++i) EXPECT_EQ(y[r * D + i], xv[r * D + i]);
    }
  }
}

// Hugging Face style: cos/sin over the full 3a dims, rotate_half, independent of the
// kernel's pair loop. freq index of dim i (< 3a): k = i mod 3a/2, axis k / (a/2), j = k mod (a/2).
std::vector<double> rope_3d_hf(const std::vector<float>& x, const std::vector<int32_t>& pos, int64_t N, int64_t H,
                               int64_t D, double theta) {
  const int64_t a = 2 * (D / 6), half = 3 * a / 2;
  std::vector<double> y(x.begin(), x.end());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const float* r = &x[(n * H + h) * D];
      for (int64_t i = 0; i < 3 * a; ++i) {
        const int64_t k = i % half, axis = k / (a / 2), j = k % (a / 2);
        const double ang = pos[n * 3 + axis] * std::pow(theta, -2.0 * j / a);
        const double rot = i < half ? -double(r[i + half]) : double(r[i - half]);
        y[(n * H + h) * D + i] = r[i] * std::cos(ang) + rot * std::sin(ang);
      }
    }
  return y;
}

TEST(CpuRefRope3d, MatchesHfFormulaAndPassesTail) {
  for (int64_t D : {80, 64, 128, 12}) {
    for (DType dt : kActDTypes) {
      RefDevice d;
      const int64_t N = 3, H = 2;
      auto xv = random_values(N * H * D, dt, 41);
      const std::vector<int32_t> pos = {0, 0, 0, 3, 5, 7, 1, 11, 2};
      ops::Rope3dArgs a;
      a.x = d.make(dt, {N, H, D}, xv);
      a.pos = d.make_i32({N, 3}, pos);
      a.theta = 1e4f;
      a.y = d.out(dt, {N, H, D});
      d.run(hal::OpId::rope_3d, a);
      auto y = d.get(a.y);
      auto ref = rope_3d_hf(xv, pos, N, H, D, 1e4);
      const int64_t rot_dims = 3 * 2 * (D / 6);
      for (int64_t n = 0; n < N * H; ++n)
        for (int64_t i = 0; i < D; ++i) {
          const size_t k = n * D + i;
          if (i >= rot_dims)
            EXPECT_EQ(y[k], xv[k]) << "D=" << D << " dim " << i << " must pass through";
          else
            EXPECT_NEAR(y[k], ref[k], 2 * round_tol(dt) * 2 + 1e-6) << "D=" << D << " dim " << i;
        }
      ops::Rope3dArgs in = a;
      in.y = in.x;
      d.run(hal::OpId::rope_3d, in);
      EXPECT_EQ(d.get(in.x), y) << "in place, D=" << D;
    }
  }
}

TEST(CpuRefRope3d, HandComputedM3Layout) {
  // D = 80: a = 26, 13 t / 13 h / 13 w frequencies, pairs (i, i+39), dims 78 and 79 pass.
  RefDevice d;
  const int64_t D = 80;
  std::vector<float> xv(D);
  for (int64_t i = 0; i < D; ++i) xv[i] = 0.01f * static_cast<float>(i + 1);
  ops::Rope3dArgs a;
  a.x = d.make(DType::f32, {1, 1, D}, xv);
  a.pos = d.make_i32({1, 3}, {2, 3, 4});
  a.y = d.out(DType::f32, {1, 1, D});
  d.run(hal::OpId::rope_3d, a);
  auto y = d.get(a.y);
  auto check = [&](int64_t i, double ang) {
    EXPECT_NEAR(y[i], xv[i] * std::cos(ang) - xv[i + 39] * std::sin(ang), 1e-6) << i;
    EXPECT_NEAR(y[i + 39], xv[i + 39] * std::cos(ang) + xv[i] * std::sin(ang), 1e-6) << i;
  };
  check(0, 2.0);                               // t, j = 0
  check(5, 2.0 * std::pow(1e4, -10.0 / 26));   // t, j = 5
  check(13, 3.0);                              // h, j = 0
  check(20, 3.0 * std::pow(1e4, -14.0 / 26));  // h, j = 7
  check(26, 4.0);                              // w, j = 0
  check(38, 4.0 * std::pow(1e4, -24.0 / 26));  // w, j = 12
  EXPECT_EQ(y[78], xv[78]);
  EXPECT_EQ(y[79], xv[79]);
}

}  // namespace
}  // namespace msa::test
