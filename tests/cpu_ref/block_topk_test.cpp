// block_topk of cpu-ref: hand-worked selections for each rule of the contract, and a
// brute-force oracle (forced set from every query position, then a stable sort of all
// other candidates) on random scores full of ties, -inf, NaN and signed zeros.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::cpu_ref_test {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct TopkParams {
  int Bs = 4, k = 3, n_sink = 0, n_local = 1, Qb = 1;
};

struct TopkResult {
  std::vector<int32_t> idx, cnt;
};

// Runs block_topk through ops:: on scores [NQ][Hs][max_blocks].
TopkResult run_topk(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Hs, int max_blocks,
                    const std::vector<float>& scores, const TopkParams& p) {
  Ref ref;
  const Layout L = make_layout(q_lens, kv_lens, p.Bs, 1);
  const int64_t NQ = query_blocks(L, p.Qb).nq();
  ops::BlockTopkArgs a;
  a.block_score = ref.make(DType::f32, {NQ, Hs, max_blocks}, scores);
  a.kv_len = ref.make_i32({L.B}, L.kv_len);
  a.cu_q = ref.make_i32({L.B + 1}, L.cu_q);
  a.Qb = p.Qb;
  a.NQ = NQ;
  a.Bs = p.Bs;
  a.k = p.k;
  a.n_sink = p.n_sink;
  a.n_local = p.n_local;
  a.block_idx = ref.out(DType::i32, {NQ, Hs, p.k});
  a.block_cnt = ref.out(DType::i32, {NQ, Hs});
  ops::block_topk(ref.device(), a);
  return {ref.get_i32(a.block_idx), ref.get_i32(a.block_cnt)};
}

// One decode query at position kv_len-1, one selection head.
TopkResult one_row(int kv_len, const std::vector<float>& scores, const TopkParams& p) {
  return run_topk({1}, {kv_len}, 1, static_cast<int>(scores.size()), scores, p);
}

using V = std::vector<int32_t>;

TEST(CpuRefBlockTopk, ForcedLocalThenBestScores) {
  // pos 19, Bs 4: blocks 0..4 valid; block 4 is forced, then 2 (7) and 0 (5).
  const auto r = one_row(20, {5, 1, 7, 3, 0}, {.Bs = 4, .k = 3});
  EXPECT_EQ(r.idx, (V{0, 2, 4}));
  EXPECT_EQ(r.cnt, (V{3}));
}

TEST(CpuRefBlockTopk, ForcedBlockWinsEvenAtMinusInf) {
  const auto r = one_row(20, {5, 1, 7, 3, kNegInf}, {.Bs = 4, .k = 2});
  EXPECT_EQ(r.idx, (V{2, 4}));
}

TEST(CpuRefBlockTopk, TiesGoToLowerIndex) {
  const auto r = one_row(20, {2, 9, 2, 2, 0}, {.Bs = 4, .k = 3});
  EXPECT_EQ(r.idx, (V{0, 1, 4}));
  const auto s = one_row(24, {1, 3, 3, 3, 3, 0}, {.Bs = 4, .k = 3});
  EXPECT_EQ(s.idx, (V{1, 2, 5}));
}

TEST(CpuRefBlockTopk, SignedZerosAreEqual) {
  // -0 at block 1 and +0 at block 2 tie: the lower index wins in both orders.
  EXPECT_EQ(one_row(16, {-1, -0.0f, 0.0f, 5}, {.Bs = 4, .k = 2}).idx, (V{1, 3}));
  EXPECT_EQ(one_row(16, {-1, 0.0f, -0.0f, 5}, {.Bs = 4, .k = 2}).idx, (V{1, 3}));
}

TEST(CpuRefBlockTopk, AtMostKValidBlocksTakesAllWhateverTheScores) {
  // pos 9, Bs 4: 3 valid blocks <= k = 4; scores past the valid range are never read.
  const auto r = one_row(10, {kNegInf, kNaN, kNegInf, 100, 100}, {.Bs = 4, .k = 4});
  EXPECT_EQ(r.idx, (V{0, 1, 2, -1}));
  EXPECT_EQ(r.cnt, (V{3}));
  // Exactly k valid blocks, n_local 0.
  EXPECT_EQ(one_row(12, {kNegInf, kNegInf, kNegInf}, {.Bs = 4, .k = 3, .n_local = 0}).idx, (V{0, 1, 2}));
}

TEST(CpuRefBlockTopk, MinusInfAndNaNNeverChosenByScore) {
  const auto r = one_row(24, {kNegInf, kNaN, 1, kNegInf, kNaN, 0}, {.Bs = 4, .k = 4});
  EXPECT_EQ(r.idx, (V{2, 5, -1, -1}));
  EXPECT_EQ(r.cnt, (V{2}));
  // A finite negative score beats NaN (NaN counts as -inf).
  EXPECT_EQ(one_row(16, {kNaN, -1e30f, kNaN, 0}, {.Bs = 4, .k = 2}).idx, (V{1, 3}));
}

TEST(CpuRefBlockTopk, SinksAndSeveralLocalBlocks) {
  // pos 31, Bs 4: 8 valid blocks. n_sink 2, n_local 2 force {0, 1, 6, 7}; one slot left.
  const std::vector<float> s = {-5, -5, 1, 4, 2, 3, -9, -9};
  EXPECT_EQ(one_row(32, s, {.Bs = 4, .k = 5, .n_sink = 2, .n_local = 2}).idx, (V{0, 1, 3, 6, 7}));
  // n_local 0: nothing forced, the local block can be dropped.
  EXPECT_EQ(one_row(32, s, {.Bs = 4, .k = 2, .n_local = 0}).idx, (V{3, 5}));
  // n_local 1 with a sink.
  EXPECT_EQ(one_row(32, s, {.Bs = 4, .k = 3, .n_sink = 1, .n_local = 1}).idx, (V{0, 3, 7}));
  // n_local 3 near the start: pos 5 has only blocks 0, 1 (nvalid 2 <= k: take all).
  EXPECT_EQ(one_row(6, {7, 7}, {.Bs = 4, .k = 3, .n_local = 3}).idx, (V{0, 1, -1}));
}

TEST(CpuRefBlockTopk, QueryBlockForcesTheLocalBlockOfEveryQuery) {
  // Bs 4, Qb 8: one prefill of 8 queries at positions 16..23 is one query block spanning
  // blocks 4 and 5, both forced (n_local 1). 6 valid blocks > k 3.
  const std::vector<float> s = {0, 9, 1, 2, -3, -3, 50, 50};
  TopkResult r = run_topk({8}, {24}, 1, 8, s, {.Bs = 4, .k = 3, .Qb = 8});
  EXPECT_EQ(r.idx, (V{1, 4, 5}));
  // Chunked: 6 queries at 18..23 split into query blocks {18..23} (Qb 8: 16..23) -> same.
  r = run_topk({6}, {24}, 1, 8, s, {.Bs = 4, .k = 3, .Qb = 8});
  EXPECT_EQ(r.idx, (V{1, 4, 5}));
  // Qb 4 (<= Bs): queries 14..21 form blocks {14,15}, {16..19}, {20,21} with local blocks
  // 3, 4 and 5; n_local 2 adds the block before each.
  const std::vector<float> t3 = {0, 9, 1, 2, -3, -3, 50, 50,  //
                                 0, 9, 1, 2, -3, -3, 50, 50,  //
                                 0, 9, 1, 2, -3, -3, 50, 50};
  r = run_topk({8}, {22}, 1, 8, t3, {.Bs = 4, .k = 3, .n_local = 2, .Qb = 4});
  EXPECT_EQ(r.idx, (V{1, 2, 3, 1, 3, 4, 1, 4, 5}));
  EXPECT_EQ(r.cnt, (V{3, 3, 3}));
}

TEST(CpuRefBlockTopk, SelectionHeadsAreIndependent) {
  // Hs = 2 (per_kv_head with Hkv 2): each head ranks its own row.
  const std::vector<float> s = {1, 5, 2, 0, /*head 1*/ 5, 1, 2, 0};
  const TopkResult r = run_topk({1}, {16}, 2, 4, s, {.Bs = 4, .k = 2});
  EXPECT_EQ(r.idx, (V{1, 3, 0, 3}));
  EXPECT_EQ(r.cnt, (V{2, 2}));
}

TEST(CpuRefBlockTopk, EmptyQueriesMakeNoRows) {
  // Sequences with q_len 0 own no query block; rows follow sequence order.
  const std::vector<float> s = {3, 1, 2, 0, 0, /*seq 3*/ 0, 1, 3, 1, 2};
  const TopkResult r = run_topk({0, 1, 0, 1}, {9, 20, 0, 15}, 1, 5, s, {.Bs = 4, .k = 2});
  EXPECT_EQ(r.idx, (V{0, 4, 2, 3}));
}

// --- the brute-force oracle -----------------------------------------------------------

TopkResult brute_force(const Layout& L, int Hs, int max_blocks, const std::vector<float>& scores, const TopkParams& p) {
  const QueryBlocks qbs = query_blocks(L, p.Qb);
  TopkResult r;
  for (int64_t n = 0; n < qbs.nq(); ++n) {
    const auto& ps = qbs.positions[n];
    const int64_t p1 = *std::max_element(ps.begin(), ps.end());
    const int nvalid = static_cast<int>(p1 / p.Bs) + 1;
    for (int h = 0; h < Hs; ++h) {
      std::vector<int> chosen, cand;
      for (int c = 0; c < nvalid; ++c) {
        bool forced = c < p.n_sink;
        for (int64_t pos : ps) {
          const int64_t own = pos / p.Bs;
          forced = forced || (p.n_local > 0 && c <= own && c > own - p.n_local);
        }
        (nvalid <= p.k || forced ? chosen : cand).push_back(c);
      }
      auto key = [&](int c) {
        const float s = scores[(n * Hs + h) * max_blocks + c];
        return std::isnan(s) ? kNegInf : s;
      };
      std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) { return key(a) > key(b); });
      for (int c : cand)
        if (static_cast<int>(chosen.size()) < p.k && key(c) != kNegInf) chosen.push_back(c);
      std::sort(chosen.begin(), chosen.end());
      r.cnt.push_back(static_cast<int32_t>(chosen.size()));
      chosen.resize(static_cast<size_t>(p.k), -1);
      r.idx.insert(r.idx.end(), chosen.begin(), chosen.end());
    }
  }
  return r;
}

TEST(CpuRefBlockTopk, MatchesBruteForce) {
  const std::vector<int> q_lens = {1, 0, 7, 13, 1, 40, 3};
  const std::vector<int> kv_lens = {1, 4, 30, 64, 51, 90, 200};
  cases::Rng rng(123);
  int checked = 0;
  for (int Bs : {4, 8, 16})
    for (int Qb : {1, 2, 8, 32})
      for (int n_sink : {0, 1, 2})
        for (int n_local : {0, 1, 2})
          for (int k : {1, 3, 6}) {
            const int forced = n_sink + (n_local > 0 ? n_local - 1 + std::max(1, Qb / Bs) : 0);
            if (k < forced) continue;  // refused by the host check
            const TopkParams p{Bs, k, n_sink, n_local, Qb};
            const Layout L = make_layout(q_lens, kv_lens, Bs, 1);
            const int Hs = 2, max_blocks = L.max_blocks;
            const int64_t NQ = query_blocks(L, Qb).nq();
            // Few distinct values: many ties; some -inf, NaN, -0 and +0.
            const float pool[] = {-1, 0.0f, -0.0f, 0.5f, 2, 2, kNegInf, kNaN, 7};
            std::vector<float> s(static_cast<size_t>(NQ) * Hs * max_blocks);
            for (auto& x : s) x = pool[rng.below(9)];
            const TopkResult got = run_topk(q_lens, kv_lens, Hs, max_blocks, s, p);
            const TopkResult want = brute_force(L, Hs, max_blocks, s, p);
            ASSERT_EQ(got.idx, want.idx) << "Bs=" << Bs << " Qb=" << Qb << " n_sink=" << n_sink
                                         << " n_local=" << n_local << " k=" << k;
            ASSERT_EQ(got.cnt, want.cnt);
            ++checked;
          }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace msa::cpu_ref_test
