// block_topk is identical on every backend for identical scores (docs/spec.md, "Op:
// block_topk": NaN counts as -inf, -inf is never chosen, -0 == +0, ties go to the lower
// block index). Scores here are adversarial: all ties, NaN, +-inf, signed zeros,
// denormals, FLT_MAX; for several k / n_sink / n_local / Qb. Each backend's block_idx
// and block_cnt must equal cpu-ref's exactly; a few rows are also checked against the
// rule directly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"
#include "run_util.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct TopkProblem {
  std::vector<int32_t> q_len, kv_len;
  int Qb = 1, Bs = 64, k = 4, n_sink = 0, n_local = 1, Hs = 2, max_blocks = 0;
  int64_t NQ = 0;
  std::vector<float> scores;  // [NQ][Hs][max_blocks]
};

enum class Pattern { all_equal, special_mix, all_nan, all_neg_inf, few_finite, signed_zeros };

std::vector<float> make_scores(Pattern p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  static const float kSpecial[] = {kNaN,
                                   -kInf,
                                   kInf,
                                   -0.0f,
                                   0.0f,
                                   1.0f,
                                   1.0f,
                                   2.0f,
                                   std::numeric_limits<float>::denorm_min(),
                                   -std::numeric_limits<float>::max(),
                                   std::numeric_limits<float>::max(),
                                   -1.0f};
  std::vector<float> s(n);
  for (size_t i = 0; i < n; ++i) {
    switch (p) {
      case Pattern::all_equal:
        s[i] = 0.5f;
        break;
      case Pattern::special_mix:
        s[i] = kSpecial[rng() % std::size(kSpecial)];
        break;
      case Pattern::all_nan:
        s[i] = kNaN;
        break;
      case Pattern::all_neg_inf:
        s[i] = -kInf;
        break;
      case Pattern::few_finite:
        s[i] = rng() % 5 == 0 ? static_cast<float>(rng() % 3) : (rng() % 2 ? kNaN : -kInf);
        break;
      case Pattern::signed_zeros:
        s[i] = rng() % 2 ? 0.0f : -0.0f;
        break;
    }
  }
  return s;
}

TopkProblem problem(int Qb, int k, int n_sink, int n_local, Pattern p) {
  TopkProblem t;
  t.q_len = {1, 5, 3, 0, 70};
  t.kv_len = {1000, 700, 130, 64, 900};
  t.Qb = Qb, t.k = k, t.n_sink = n_sink, t.n_local = n_local;
  std::vector<int32_t> cu{0};
  for (int32_t q : t.q_len) cu.push_back(cu.back() + q);
  t.NQ = msa::ops::count_query_blocks(cu, t.kv_len, Qb);
  t.max_blocks = (1000 + t.Bs - 1) / t.Bs;
  t.scores = make_scores(p, static_cast<size_t>(t.NQ * t.Hs * t.max_blocks), 1234u + static_cast<uint32_t>(p));
  return t;
}

struct TopkResult {
  std::vector<int32_t> idx, cnt;
};

TopkResult run(msa::hal::Device& dev, const TopkProblem& t) {
  HostTensor score(DType::f32, {t.NQ, t.Hs, t.max_blocks});
  std::memcpy(score.bytes.data(), t.scores.data(), score.bytes.size());
  HostTensor kv(DType::i32, {static_cast<int64_t>(t.kv_len.size())});
  std::memcpy(kv.bytes.data(), t.kv_len.data(), kv.bytes.size());
  HostTensor cu(DType::i32, {static_cast<int64_t>(t.q_len.size()) + 1});
  int32_t acc = 0;
  cu.data<int32_t>()[0] = 0;
  for (size_t i = 0; i < t.q_len.size(); ++i) cu.data<int32_t>()[i + 1] = acc += t.q_len[i];
  auto s = msa::hal::to_device(dev, score), l = msa::hal::to_device(dev, kv), c = msa::hal::to_device(dev, cu);
  auto idx = msa::hal::to_device(dev, HostTensor(DType::i32, {t.NQ, t.Hs, t.k}));
  auto cnt = msa::hal::to_device(dev, HostTensor(DType::i32, {t.NQ, t.Hs}));
  msa::ops::BlockTopkArgs a;
  a.block_score = s.tensor, a.kv_len = l.tensor, a.cu_q = c.tensor, a.Qb = t.Qb, a.NQ = t.NQ, a.Bs = t.Bs;
  a.k = t.k, a.n_sink = t.n_sink, a.n_local = t.n_local, a.block_idx = idx.tensor, a.block_cnt = cnt.tensor;
  msa::ops::block_topk(dev, a);
  dev.stream().synchronize();
  const HostTensor hi = msa::hal::to_host(dev, idx.tensor), hc = msa::hal::to_host(dev, cnt.tensor);
  TopkResult r;
  r.idx.assign(hi.data<int32_t>(), hi.data<int32_t>() + hi.numel());
  r.cnt.assign(hc.data<int32_t>(), hc.data<int32_t>() + hc.numel());
  return r;
}

struct Config {
  int Qb, k, n_sink, n_local;
};
const Config kConfigs[] = {{1, 1, 0, 1},  {1, 4, 0, 1},  {1, 5, 2, 2},   {1, 16, 0, 1}, {4, 4, 1, 1},
                           {64, 4, 0, 1}, {64, 5, 2, 2}, {128, 6, 1, 1}, {1, 3, 0, 0},  {16, 2, 0, 0}};
const Pattern kPatterns[] = {Pattern::all_equal,   Pattern::special_mix, Pattern::all_nan,
                             Pattern::all_neg_inf, Pattern::few_finite,  Pattern::signed_zeros};

class BlockTopkAcrossBackends : public ::testing::TestWithParam<std::string> {};

TEST_P(BlockTopkAcrossBackends, IdenticalToCpuRef) {
  const std::string backend = GetParam();
  if (const std::string why = msa_test::unavailable(backend); !why.empty()) GTEST_SKIP() << why;
  auto ref = msa::hal::create_device("cpu-ref");
  auto dev = msa::hal::create_device(backend);
  for (const Config& cfg : kConfigs)
    for (Pattern p : kPatterns) {
      SCOPED_TRACE("Qb=" + std::to_string(cfg.Qb) + " k=" + std::to_string(cfg.k) +
                   " n_sink=" + std::to_string(cfg.n_sink) + " n_local=" + std::to_string(cfg.n_local) +
                   " pattern=" + std::to_string(static_cast<int>(p)));
      const TopkProblem t = problem(cfg.Qb, cfg.k, cfg.n_sink, cfg.n_local, p);
      const TopkResult want = run(*ref, t);
      const TopkResult got = run(*dev, t);
      EXPECT_EQ(got.idx, want.idx);
      EXPECT_EQ(got.cnt, want.cnt);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, BlockTopkAcrossBackends, ::testing::ValuesIn(msa_test::kBackends),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The tie and NaN rules, straight from the contract, on cpu-ref (and thereby on every
// backend, which the test above holds equal to it). Sequence 0 decodes at position 999:
// 16 valid blocks, the local one is 15.
TEST(BlockTopkRules, TiesGoToTheLowerIndexAndNanIsNeverChosen) {
  auto ref = msa::hal::create_device("cpu-ref");
  {
    const TopkResult r = run(*ref, problem(1, 4, 0, 1, Pattern::all_equal));
    // Row (query block 0, head 0): local block 15 forced, then the three lowest ties.
    EXPECT_EQ(std::vector<int32_t>(r.idx.begin(), r.idx.begin() + 4), (std::vector<int32_t>{0, 1, 2, 15}));
    EXPECT_EQ(r.cnt[0], 4);
  }
  {
    const TopkResult r = run(*ref, problem(1, 4, 0, 1, Pattern::all_nan));
    // Only the forced local block: NaN scores are -inf, never chosen.
    EXPECT_EQ(std::vector<int32_t>(r.idx.begin(), r.idx.begin() + 4), (std::vector<int32_t>{15, -1, -1, -1}));
    EXPECT_EQ(r.cnt[0], 1);
  }
  {
    const TopkResult r = run(*ref, problem(1, 5, 2, 2, Pattern::signed_zeros));
    // Sinks 0, 1 and local 14, 15 forced; -0 == +0 so the tie goes to block 2.
    EXPECT_EQ(std::vector<int32_t>(r.idx.begin(), r.idx.begin() + 5), (std::vector<int32_t>{0, 1, 2, 14, 15}));
  }
}

}  // namespace
