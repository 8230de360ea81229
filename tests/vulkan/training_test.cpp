// The training ops on Vulkan against cpu-ref on the training tests' varlen paged cases
// (tests/training/training_util.h: NaN in every slack slot, garbage past each sequence's
// blocks in block_table): selections with padding, ids past the sequence and empty sets,
// both modes, Qb 1 and > 1, pages attended by many tokens of several rows; bitwise
// reproducibility run to run; and the device-side index checks raising the forward's
// errors. The case library's shapes are covered by `msa check --backend vulkan`.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "tests/training/training_util.h"
#include "tests/vulkan/vk_test_util.h"

namespace msa::vulkan_test {
namespace {

using training_test::Forward;
using training_test::Grads;
using training_test::PagedCase;
using training_test::Ref;

// The Vulkan device as a training_util Ref, or null (the test skips) without one.
std::unique_ptr<Ref> open_vulkan() {
  try {
    return std::make_unique<Ref>("vulkan");
  } catch (const Error&) {
    return nullptr;
  }
}

// Global NMSE of every gradient <= tol, and exactly 0 at every slack (NaN) slot.
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::vector<float>& x, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  EXPECT_LE(nmse(got, ref), tol) << what;
  for (size_t i = 0; i < x.size() && i < got.size(); ++i)
    if (std::isnan(x[i])) ASSERT_EQ(got[i], 0.0f) << what << "[" << i << "]: slack slot";
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct TrainingShape {
  const char* name;
  std::vector<int> q_lens, kv_lens;
  int Bs, Hq, Hkv, D;
  bool sparse;
  int Qb, K;
  ops::SelectionMode mode;
  int empty_every;
  int Di = 16;
};

class TrainingVsRef : public ::testing::TestWithParam<TrainingShape> {};

TEST_P(TrainingVsRef, AttentionBackwardMatchesReferenceAndRepeats) {
  const TrainingShape& s = GetParam();
  auto vk = open_vulkan();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  Ref ref;
  PagedCase c = training_test::make_paged_case(s.q_lens, s.kv_lens, s.Bs, s.Hq, s.Hkv, s.D, 7);
  if (s.sparse) training_test::select_random(c, s.Qb, s.K, s.mode, 5, s.empty_every);
  const Forward f = training_test::paged_forward(ref, c, s.sparse, c.q, c.k, c.v);
  const Grads want = training_test::paged_backward(ref, c, s.sparse, f);
  const Grads got = training_test::paged_backward(*vk, c, s.sparse, f);
  vk->device().stream().synchronize();  // raises the device error flags
  expect_close(got.dq, want.dq, c.q, 1e-10, "dq");
  expect_close(got.dk, want.dk, c.k, 1e-10, "dk_cache");
  expect_close(got.dv, want.dv, c.v, 1e-10, "dv_cache");
  const Grads again = training_test::paged_backward(*vk, c, s.sparse, f);
  EXPECT_TRUE(bitwise_equal(again.dq, got.dq));
  EXPECT_TRUE(bitwise_equal(again.dk, got.dk));
  EXPECT_TRUE(bitwise_equal(again.dv, got.dv));
}

// indexer_kl on the same cases: an indexer of Di = 16 with f32 keys, lse from the
// reference forward (over the same token sets), a random dkl.
TEST_P(TrainingVsRef, IndexerKlMatchesReferenceAndRepeats) {
  const TrainingShape& s = GetParam();
  auto vk = open_vulkan();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  Ref ref;
  PagedCase c = training_test::make_paged_case(s.q_lens, s.kv_lens, s.Bs, s.Hq, s.Hkv, s.D, 9);
  if (s.sparse) training_test::select_random(c, s.Qb, s.K, s.mode, 3, s.empty_every);
  const Forward f = training_test::paged_forward(ref, c, s.sparse, c.q, c.k, c.v);
  const int Di = s.Di, Hs = c.Hs();
  std::vector<std::vector<float>> logical;
  const auto qi = cpu_ref_test::random_values(static_cast<size_t>(c.L.T) * Hs * Di, DType::f32, 21, -2.f, 2.f);
  const auto ki = cpu_ref_test::paged_values(c.L, 1, Di, DType::f32, 22, logical, -2.f, 2.f);
  const auto dkl = cpu_ref_test::random_values(static_cast<size_t>(c.L.T) * Hs, DType::f32, 23, 0.5f, 2.f);
  auto run = [&](Ref& r) {
    ops::IndexerKlArgs a;
    a.qi = r.make(DType::f32, {c.L.T, Hs, Di}, qi);
    a.ki_cache = r.make(DType::f32, {c.L.P, c.L.Bs, Di}, ki);
    a.q = r.make(c.t, c.q_shape(), c.q);
    a.k_cache = r.make(c.t, c.kv_shape(), c.k);
    a.lse = r.make(DType::f32, {c.L.T, c.Hq}, f.lse);
    a.block_table = r.make_i32({c.L.B, c.L.max_blocks}, c.L.block_table);
    a.kv_len = r.make_i32({c.L.B}, c.L.kv_len);
    a.cu_q = r.make_i32({c.L.B + 1}, c.L.cu_q);
    a.stage = s.sparse ? ops::KlStage::sparse : ops::KlStage::dense;
    if (s.sparse) {
      a.block_idx = r.make_i32({c.qbs.nq(), Hs, c.K}, c.block_idx);
      a.Qb = c.Qb;
      a.NQ = c.qbs.nq();
    }
    a.dkl = r.make(DType::f32, {c.L.T, Hs}, dkl);
    a.mode = c.mode;
    a.kl = r.out(DType::f32, {c.L.T, Hs});
    a.dqi = r.out(DType::f32, {c.L.T, Hs, Di});
    a.dki_cache = r.out(DType::f32, {c.L.P, c.L.Bs, Di});
    ops::indexer_kl(r.device(), a);
    r.device().stream().synchronize();  // raises the device error flags
    return std::vector<std::vector<float>>{r.get(a.kl), r.get(a.dqi), r.get(a.dki_cache)};
  };
  const auto want = run(ref);
  const auto got = run(*vk);
  for (size_t i = 0; i < want[0].size(); ++i)
    EXPECT_LE(std::fabs(got[0][i] - want[0][i]), 1e-5 * std::max(1.0f, std::fabs(want[0][i]))) << "kl[" << i << "]";
  expect_close(got[1], want[1], {}, 1e-10, "dqi");
  expect_close(got[2], want[2], ki, 1e-10, "dki_cache");
  const auto again = run(*vk);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(again[i], got[i])) << "output " << i;
}

// Bad index data on the device is skipped and raised at the next synchronize() with the
// forward's messages, naming the training op.
TEST(TrainingDeviceErrors, BadIndexDataRaisesTheForwardsErrors) {
  auto vk = open_vulkan();
  if (!vk) GTEST_SKIP() << "no Vulkan device";
  Ref ref;
  struct Bad {
    const char* arg;
    std::function<void(PagedCase&, int64_t&)> spoil;  // (case, NQ)
  };
  const Bad bads[] = {
      {"block_table", [](PagedCase& c, int64_t&) { c.L.block_table[0] = c.L.P + 3; }},
      {"kv_len", [](PagedCase& c, int64_t&) { c.L.kv_len[0] = 2; }},
      {"cu_q", [](PagedCase& c, int64_t&) { c.L.cu_q[0] = 1; }},
      {"NQ", [](PagedCase&, int64_t& nq) { nq -= 1; }},
  };
  for (const Bad& bad : bads) {
    for (bool kl : {false, true}) {
      SCOPED_TRACE(std::string(bad.arg) + (kl ? " indexer_kl" : " sparse_block_attention_backward"));
      PagedCase c = training_test::make_paged_case({5, 3}, {5, 9}, 4, 4, 2, 4, 7);
      training_test::select_random(c, 1, 3, ops::SelectionMode::per_kv_head, 5);
      const Forward f = training_test::paged_forward(ref, c, true, c.q, c.k, c.v);
      int64_t nq = c.qbs.nq();
      bad.spoil(c, nq);
      Ref& r = *vk;
      const auto i32 = [&](std::vector<int64_t> shape, const std::vector<int32_t>& v) { return r.make_i32(shape, v); };
      const hal::Tensor bt = i32({c.L.B, c.L.max_blocks}, c.L.block_table), kvl = i32({c.L.B}, c.L.kv_len),
                        cu = i32({c.L.B + 1}, c.L.cu_q),
                        idx = i32({nq, c.Hs(), c.K}, {c.block_idx.begin(), c.block_idx.begin() + nq * c.Hs() * c.K});
      if (kl) {
        ops::IndexerKlArgs a;
        a.qi = r.make(DType::f32, {c.L.T, c.Hs(), 4}, std::vector<float>(c.L.T * c.Hs() * 4, 0.5f));
        a.ki_cache = r.make(DType::f32, {c.L.P, c.L.Bs, 4}, std::vector<float>(c.L.P * c.L.Bs * 4, 0.25f));
        a.q = r.make(c.t, c.q_shape(), c.q), a.k_cache = r.make(c.t, c.kv_shape(), c.k);
        a.lse = r.make(DType::f32, {c.L.T, c.Hq}, f.lse);
        a.block_table = bt, a.kv_len = kvl, a.cu_q = cu, a.block_idx = idx, a.Qb = 1, a.NQ = nq;
        a.kl = r.out(DType::f32, {c.L.T, c.Hs()}), a.dqi = r.out(DType::f32, {c.L.T, c.Hs(), 4});
        a.dki_cache = r.out(DType::f32, {c.L.P, c.L.Bs, 4});
        ops::indexer_kl(r.device(), a);
      } else {
        ops::SparseAttentionBackwardArgs a;
        a.dout = r.make(c.t, c.q_shape(), c.dout), a.q = r.make(c.t, c.q_shape(), c.q);
        a.k_cache = r.make(c.t, c.kv_shape(), c.k), a.v_cache = r.make(c.t, c.kv_shape(), c.v);
        a.block_table = bt, a.kv_len = kvl, a.cu_q = cu, a.block_idx = idx, a.Qb = 1, a.NQ = nq;
        a.out = r.make(c.t, c.q_shape(), f.out), a.lse = r.make(DType::f32, {c.L.T, c.Hq}, f.lse);
        a.dq = r.out(DType::f32, c.q_shape()), a.dk_cache = r.out(DType::f32, c.kv_shape());
        a.dv_cache = r.out(DType::f32, c.kv_shape());
        ops::sparse_block_attention_backward(r.device(), a);
      }
      const std::string op = kl ? "indexer_kl" : "sparse_block_attention_backward";
      try {
        r.device().stream().synchronize();
        ADD_FAILURE() << "synchronize() raised nothing";
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(op), std::string::npos) << what;
        EXPECT_NE(what.find(std::string("argument '") + bad.arg + "'"), std::string::npos) << what;
      }
      EXPECT_NO_THROW(r.device().stream().synchronize());  // the flags were reset
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TrainingVsRef,
    ::testing::Values(
        // A prefill from empty, a chunk over cached tokens, a q_len = 0 sequence.
        TrainingShape{"dense", {5, 3, 0}, {5, 9, 4}, 4, 4, 2, 4, false, 1, 0, ops::SelectionMode::per_kv_head, 0},
        TrainingShape{"sparse", {5, 3, 0}, {5, 9, 4}, 4, 4, 2, 4, true, 1, 3, ops::SelectionMode::per_kv_head, 0},
        TrainingShape{"sparse_Qb4", {5, 3, 0}, {5, 9, 4}, 4, 4, 2, 4, true, 4, 3, ops::SelectionMode::per_kv_head, 0},
        TrainingShape{
            "sparse_shared_empty_sets", {5, 3, 0}, {5, 9, 4}, 4, 4, 2, 4, true, 2, 3, ops::SelectionMode::shared, 3},
        // Pages attended by many tokens and rows, G = 4, a block larger than a workgroup
        // (Bs = 160); D = Di = 64 over 100 tokens is past lavapipe's loop limit
        // (common.glsl) without the shaders' unrolled runs.
        TrainingShape{
            "dense_long", {100, 40}, {300, 40}, 64, 8, 2, 32, false, 1, 0, ops::SelectionMode::per_kv_head, 0},
        TrainingShape{"sparse_long", {150}, {300}, 64, 8, 2, 32, true, 1, 3, ops::SelectionMode::per_kv_head, 0},
        TrainingShape{
            "sparse_long_Qb64_shared", {150}, {300}, 64, 4, 2, 32, true, 64, 3, ops::SelectionMode::shared, 0},
        TrainingShape{
            "dense_D64_Di64", {100}, {300}, 64, 8, 2, 64, false, 1, 0, ops::SelectionMode::per_kv_head, 0, 64},
        TrainingShape{"sparse_Bs160", {20}, {400}, 160, 4, 1, 16, true, 8, 2, ops::SelectionMode::per_kv_head, 0}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace msa::vulkan_test
