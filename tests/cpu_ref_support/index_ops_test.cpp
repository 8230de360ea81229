// embedding, scatter_visual, argmax: values, ties, NaN, and bad index data.
#include <algorithm>
#include <limits>

#include "tests/cpu_ref_support/test_util.h"

namespace msa::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(CpuRefEmbedding, GathersRows) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t V = 5, H = 3;
    auto tv = random_values(V * H, dt, 61);
    const std::vector<int32_t> ids = {4, 0, 4, 2};
    ops::EmbeddingArgs a;
    a.table = d.make(dt, {V, H}, tv);
    a.ids = d.make_i32({4}, ids);
    a.y = d.out(dt, {4, H});
    d.run(hal::OpId::embedding, a);
    auto y = d.get(a.y);
    for (size_t t = 0; t < ids.size(); ++t)
      for (int64_t h = 0; h < H; ++h) EXPECT_EQ(y[t * H + h], tv[ids[t] * H + h]);
  }
}

TEST(CpuRefEmbedding, ConvertsTableDtype) {
  RefDevice d;
  ops::EmbeddingArgs a;
  a.table = d.make(DType::bf16, {2, 2}, {1.5f, -2, 3, 0.25f});
  a.ids = d.make_i32({1}, {1});
  a.y = d.out(DType::f32, {1, 2});
  d.run(hal::OpId::embedding, a);
  EXPECT_EQ(d.get(a.y), (std::vector<float>{3, 0.25f}));
}

TEST(CpuRefEmbedding, OutOfRangeIdsThrowNamingIds) {
  for (int32_t bad : {-1, 5, std::numeric_limits<int32_t>::max()}) {
    RefDevice d;
    ops::EmbeddingArgs a;
    a.table = d.make(DType::f32, {5, 2}, random_values(10, DType::f32, 62));
    a.ids = d.make_i32({3}, {0, bad, 1});
    a.y = d.out(DType::f32, {3, 2});
    expect_error([&] { d.run(hal::OpId::embedding, a); }, {"embedding", "ids", std::to_string(bad).c_str()});
  }
}

TEST(CpuRefScatterVisual, ReplacesPlaceholderRowsInOrder) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t T = 6, H = 4, Nv = 3;
    const int32_t ph = 99;
    const std::vector<int32_t> tokens = {1, ph, 2, ph, ph, 3};
    auto xv = random_values(T * H, dt, 71), vv = random_values(Nv * H, dt, 72);
    ops::ScatterVisualArgs a;
    a.tokens = d.make_i32({T}, tokens);
    a.vis = d.make(dt, {Nv, H}, vv);
    a.placeholder = ph;
    a.x = d.make(dt, {T, H}, xv);
    d.run(hal::OpId::scatter_visual, a);
    auto x = d.get(a.x);
    int64_t r = 0;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t h = 0; h < H; ++h)
        EXPECT_EQ(x[t * H + h], tokens[t] == ph ? vv[r * H + h] : xv[t * H + h]) << "t=" << t;
      if (tokens[t] == ph) ++r;
    }
  }
}

TEST(CpuRefScatterVisual, CountMismatchThrowsAndLeavesXAlone) {
  for (int64_t Nv : {1, 3}) {
    RefDevice d;
    auto xv = random_values(4 * 2, DType::f32, 73);
    ops::ScatterVisualArgs a;
    a.tokens = d.make_i32({4}, {7, 0, 7, 0});  // two placeholders
    a.vis = d.make(DType::f32, {Nv, 2}, random_values(Nv * 2, DType::f32, 74));
    a.placeholder = 7;
    a.x = d.make(DType::f32, {4, 2}, xv);
    expect_error([&] { d.run(hal::OpId::scatter_visual, a); }, {"scatter_visual", "vis", "tokens"});
    EXPECT_EQ(d.get(a.x), xv);
  }
}

TEST(CpuRefScatterVisual, NoPlaceholdersNoVision) {
  RefDevice d;
  auto xv = random_values(3 * 2, DType::f32, 75);
  ops::ScatterVisualArgs a;
  a.tokens = d.make_i32({3}, {1, 2, 3});
  a.vis = d.make(DType::f32, {0, 2}, {});
  a.placeholder = 7;
  a.x = d.make(DType::f32, {3, 2}, xv);
  d.run(hal::OpId::scatter_visual, a);
  EXPECT_EQ(d.get(a.x), xv);
}

TEST(CpuRefArgmax, TiesNaNAndSigns) {
  RefDevice d;
  const int64_t N = 5;
  const std::vector<float> rows = {
      1,     3,     3,     2,     3,      // tie: lowest index 1
      kNaN,  -1,    kNaN,  -0.5f, kNaN,   // NaN never the max: 3
      kNaN,  kNaN,  kNaN,  kNaN,  kNaN,   // all NaN: 0
      -kInf, -kInf, -kInf, -kInf, -kInf,  // all -inf: 0
      -0.0f, 0.0f,  -1,    -2,    -3,     // -0 == +0: 0
      -5,    -4,    kInf,  kNaN,  kInf,   // +inf tie: 2
      kNaN,  -kInf, -kInf, kNaN,  -7,     // -7 beats -inf: 4
  };
  ops::ArgmaxArgs a;
  a.x = d.make(DType::f32, {7, N}, rows);
  a.idx = d.make_i32({7}, std::vector<int32_t>(7, -9));
  d.run(hal::OpId::argmax, a);
  EXPECT_EQ(d.get_i32(a.idx), (std::vector<int32_t>{1, 3, 0, 0, 0, 2, 4}));
}

TEST(CpuRefArgmax, RandomRowsEveryDtype) {
  for (DType dt : kActDTypes) {
    RefDevice d;
    const int64_t M = 9, N = 300;
    auto xv = random_values(M * N, dt, 81, -4, 4);  // bf16 rounding makes ties likely
    ops::ArgmaxArgs a;
    a.x = d.make(dt, {M, N}, xv);
    a.idx = d.make_i32({M}, std::vector<int32_t>(M, -9));
    d.run(hal::OpId::argmax, a);
    auto idx = d.get_i32(a.idx);
    for (int64_t m = 0; m < M; ++m) {
      auto row = xv.begin() + m * N;
      EXPECT_EQ(idx[m], std::max_element(row, row + N) - row) << hal::dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace msa::test
