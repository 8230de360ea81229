// sparse_block_attention_backward and dense_attention_backward on cpu-ref against finite
// differences of the forward ops (cpu-ref, f32) on small varlen paged cases: per_kv_head
// and shared selections, Qb 1 and 4, -1 padding and ids past the sequence, a q_len = 0
// sequence, NaN in every slack slot (whose gradient must be exactly 0), empty sets
// (lse = -inf rows), and bitwise reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/training/training_util.h"

namespace msa::training_test {
namespace {

constexpr double kTol = 2e-4;

class AttentionBackward : public ::testing::TestWithParam<Variant> {};

TEST_P(AttentionBackward, MatchesFiniteDifferencesOfTheForward) {
  const Variant& var = GetParam();
  Ref r;
  // Three sequences: a prefill from empty, a chunk over cached tokens, and a q_len = 0 one.
  PagedCase c = make_paged_case({5, 3, 0}, {5, 9, 4}, 4, 4, 2, 4, 11);
  if (var.sparse) select_random(c, var.Qb, 3, var.mode, var.seed, var.empty_every);
  const Forward f = paged_forward(r, c, var.sparse, c.q, c.k, c.v);
  const Grads g = paged_backward(r, c, var.sparse, f);
  const auto loss_q = [&](const std::vector<float>& q) {
    return loss_of(c.dout, paged_forward(r, c, var.sparse, q, c.k, c.v).out);
  };
  const auto loss_k = [&](const std::vector<float>& k) {
    return loss_of(c.dout, paged_forward(r, c, var.sparse, c.q, k, c.v).out);
  };
  const auto loss_v = [&](const std::vector<float>& v) {
    return loss_of(c.dout, paged_forward(r, c, var.sparse, c.q, c.k, v).out);
  };
  EXPECT_GT(expect_gradient(loss_q, c.q, g.dq, kTol, "dq"), 0);
  EXPECT_GT(expect_gradient(loss_k, c.k, g.dk, kTol, "dk_cache"), 0);
  EXPECT_GT(expect_gradient(loss_v, c.v, g.dv, kTol, "dv_cache"), 0);
  // Rows with an empty set (lse = -inf) get dq = 0.
  int empty_rows = 0;
  for (size_t row = 0; row < f.lse.size(); ++row) {
    if (f.lse[row] != -std::numeric_limits<float>::infinity()) continue;
    ++empty_rows;
    for (int d = 0; d < c.D; ++d) EXPECT_EQ(g.dq[row * c.D + d], 0.0f) << "row " << row;
  }
  if (var.empty_every > 0) EXPECT_GT(empty_rows, 0);
  // Bitwise reproducible.
  const Grads again = paged_backward(r, c, var.sparse, f);
  EXPECT_EQ(0, std::memcmp(again.dk.data(), g.dk.data(), g.dk.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(again.dv.data(), g.dv.data(), g.dv.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(again.dq.data(), g.dq.data(), g.dq.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Variants, AttentionBackward,
                         ::testing::Values(Variant{"dense", false, 1, ops::SelectionMode::per_kv_head, 0},
                                           Variant{"sparse_per_kv_head", true, 1, ops::SelectionMode::per_kv_head, 0},
                                           Variant{"sparse_Qb4", true, 4, ops::SelectionMode::per_kv_head, 0},
                                           Variant{"sparse_shared", true, 1, ops::SelectionMode::shared, 0},
                                           Variant{"sparse_shared_Qb2_empty_sets", true, 2, ops::SelectionMode::shared,
                                                   3, 17},
                                           Variant{"sparse_empty_sets", true, 1, ops::SelectionMode::per_kv_head, 2}),
                         [](const auto& info) { return std::string(info.param.name); });

// Selecting every block of every sequence is dense attention: the two backward ops agree.
TEST(AttentionBackward, SparseOverEveryBlockEqualsDense) {
  Ref r;
  PagedCase c = make_paged_case({4, 6}, {7, 6}, 2, 4, 2, 4, 21);
  c.Qb = 1;
  c.K = 4;
  c.qbs = cpu_ref_test::query_blocks(c.L, 1);
  for (int64_t n = 0; n < c.qbs.nq(); ++n)
    for (int hs = 0; hs < c.Hs(); ++hs)
      for (int j = 0, nb = c.L.n_blocks(c.qbs.seq[n]); j < c.K; ++j) c.block_idx.push_back(j < nb ? nb - 1 - j : -1);
  const Forward fs = paged_forward(r, c, true, c.q, c.k, c.v), fd = paged_forward(r, c, false, c.q, c.k, c.v);
  const Grads gs = paged_backward(r, c, true, fs), gd = paged_backward(r, c, false, fd);
  for (size_t i = 0; i < gs.dq.size(); ++i) EXPECT_NEAR(gs.dq[i], gd.dq[i], 1e-6) << i;
  for (size_t i = 0; i < gs.dk.size(); ++i) EXPECT_NEAR(gs.dk[i], gd.dk[i], 1e-6) << i;
  for (size_t i = 0; i < gs.dv.size(); ++i) EXPECT_NEAR(gs.dv[i], gd.dv[i], 1e-6) << i;
}

// bf16 inputs give the gradients of the same (bf16-representable) values in f32, up to
// the forward out's rounding to bf16.
TEST(AttentionBackward, Bf16InputsMatchTheSameValuesInF32) {
  Ref r;
  PagedCase c = make_paged_case({3}, {6}, 4, 2, 1, 4, 31);
  select_random(c, 1, 2, ops::SelectionMode::per_kv_head, 32);
  for (auto* vals : {&c.q, &c.k, &c.v, &c.dout})
    for (float& x : *vals) x = hal::round_to(DType::bf16, x);
  const Forward f32 = paged_forward(r, c, true, c.q, c.k, c.v);
  const Grads g32 = paged_backward(r, c, true, f32);
  PagedCase b = c;
  b.t = DType::bf16;
  const Forward fb = paged_forward(r, b, true, b.q, b.k, b.v);
  const Grads gb = paged_backward(r, b, true, fb);
  // dv does not read out; dq and dk see out's rounding to bf16 through delta = dout.out.
  for (size_t i = 0; i < gb.dv.size(); ++i) EXPECT_NEAR(gb.dv[i], g32.dv[i], 1e-6) << i;
  for (size_t i = 0; i < gb.dq.size(); ++i) EXPECT_NEAR(gb.dq[i], g32.dq[i], 3e-2) << i;
  for (size_t i = 0; i < gb.dk.size(); ++i) EXPECT_NEAR(gb.dk[i], g32.dk[i], 3e-2) << i;
}

}  // namespace
}  // namespace msa::training_test
