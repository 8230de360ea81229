// indexer_score of cpu-ref against a second computation: per query the full row of
// indexer logits over the logical key sequence, pooled per KV block (max, or
// log(sum(exp)) without max subtraction), then maximised over each query block.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hal/nvfp4.h"
#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::cpu_ref_test {
namespace {

struct IdxCase {
  Layout L;
  int Hi = 2, Di = 16, Qb = 1;
  DType qt = DType::f32, kt = DType::bf16;
  bool with_scale = false;
  ops::Pool pool = ops::Pool::max;
  float scale = 0.0f;
  std::vector<float> qi;                       // [T][Hi][Di]
  std::vector<std::vector<float>> klog, slog;  // per sequence [kv_len][Di], [kv_len]
  std::vector<float> kpaged, spaged;           // [P][Bs][Di], [P][Bs] (NaN outside valid)
  std::vector<float> codes, gscales;           // NVFP4 (kt = fp4_e2m1x2): byte values [P][Bs][Di/2], [P][Bs][Di/16]
};

// Replaces c's keys by NVFP4 keys: random code bytes, group scales from a few exact e4m3
// values (NaN in slots past kv_len); the logical keys are the decoded values.
void make_nvfp4_keys(IdxCase& c, uint64_t seed) {
  const Layout& L = c.L;
  const int G = c.Di / 16;
  cases::Rng rng(seed);
  c.kt = DType::fp4_e2m1x2;
  c.codes.resize(static_cast<size_t>(L.P) * L.Bs * c.Di / 2);
  for (auto& x : c.codes) x = static_cast<float>(rng.below(256));
  c.gscales.assign(static_cast<size_t>(L.P) * L.Bs * G, kNaN);
  const float choices[5] = {0.25f, 0.375f, 0.5f, 1.0f, 2.0f};
  for (int b = 0; b < L.B; ++b) {
    c.klog[b].assign(static_cast<size_t>(L.kv_len[b]) * c.Di, 0.f);
    for (int s = 0; s < L.kv_len[b]; ++s) {
      const size_t row = static_cast<size_t>(L.page(b, s / L.Bs)) * L.Bs + s % L.Bs;
      for (int g = 0; g < G; ++g) c.gscales[row * G + g] = choices[rng.below(5)];
      for (int d = 0; d < c.Di; ++d) {
        const auto byte = static_cast<uint8_t>(c.codes[row * c.Di / 2 + d / 2]);
        c.klog[b][static_cast<size_t>(s) * c.Di + d] =
            hal::e2m1_to_f32(static_cast<uint8_t>(byte >> (4 * (d % 2)))) * c.gscales[row * G + d / 16];
      }
    }
  }
}

IdxCase make_case(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, int Hi, int Di, DType qt,
                  DType kt, bool with_scale, uint64_t seed) {
  IdxCase c;
  c.L = make_layout(q_lens, kv_lens, Bs, seed);
  c.Hi = Hi;
  c.Di = Di;
  c.qt = qt;
  c.kt = kt;
  c.with_scale = with_scale;
  c.qi = random_values(static_cast<size_t>(c.L.T) * Hi * Di, qt, seed + 1, -2.f, 2.f);
  // fp8 keys span a wider range, as quantized keys do.
  const float kmax = kt == DType::fp8_e4m3 ? 8.f : 2.f;
  c.kpaged = paged_values(c.L, 1, Di, kt, seed + 2, c.klog, -kmax, kmax);
  if (with_scale) c.spaged = paged_values(c.L, 1, 1, DType::f32, seed + 3, c.slog, 0.05f, 0.5f);
  return c;
}

// block_score [NQ][Hi][max_blocks] as doubles.
std::vector<double> oracle(const IdxCase& c) {
  const Layout& L = c.L;
  const QueryBlocks qbs = query_blocks(L, c.Qb);
  const double scale = c.scale != 0.0f ? c.scale : static_cast<float>(1.0 / std::sqrt(double(c.Di)));
  std::vector<double> score(static_cast<size_t>(qbs.nq()) * c.Hi * L.max_blocks, -kInf);
  for (int64_t t = 0; t < L.T; ++t) {
    const int b = L.tok_seq[t];
    const int64_t pos = L.tok_pos[t];
    for (int j = 0; j < c.Hi; ++j) {
      // The query's whole logit row; -inf where not causal.
      std::vector<double> l(static_cast<size_t>(L.kv_len[b]), -kInf);
      for (int64_t s = 0; s <= pos; ++s) {
        double dot = 0;
        for (int d = 0; d < c.Di; ++d) dot += double(c.qi[(t * c.Hi + j) * c.Di + d]) * c.klog[b][s * c.Di + d];
        l[s] = scale * dot * (c.with_scale ? c.slog[b][s] : 1.0);
      }
      for (int blk = 0; blk * L.Bs <= pos; ++blk) {
        double pooled = c.pool == ops::Pool::max ? -kInf : 0.0;
        for (int64_t s = blk * L.Bs; s < std::min<int64_t>((blk + 1) * L.Bs, pos + 1); ++s)
          pooled = c.pool == ops::Pool::max ? std::max(pooled, l[s]) : pooled + std::exp(l[s]);
        if (c.pool == ops::Pool::lse) pooled = std::log(pooled);
        double& dst = score[(qbs.qb_of[t] * c.Hi + j) * L.max_blocks + blk];
        dst = std::max(dst, pooled);
      }
    }
  }
  return score;
}

std::vector<float> run(Ref& ref, const IdxCase& c, ops::SelectionMode mode = ops::SelectionMode::per_kv_head) {
  const Layout& L = c.L;
  ops::IndexerScoreArgs a;
  a.qi = ref.make(c.qt, {L.T, c.Hi, c.Di}, c.qi);
  if (c.kt == DType::fp4_e2m1x2) {
    a.ki_cache = ref.make(c.kt, {L.P, L.Bs, c.Di / 2}, c.codes);  // raw byte values
    a.ki_scale = ref.make(DType::fp8_e4m3, {L.P, L.Bs, c.Di / 16}, c.gscales);
  } else {
    a.ki_cache = ref.make(c.kt, {L.P, L.Bs, c.Di}, c.kpaged);
    if (c.with_scale) a.ki_scale = ref.make(DType::f32, {L.P, L.Bs}, c.spaged);
  }
  a.block_table = ref.make_i32({L.B, L.max_blocks}, L.block_table);
  a.kv_len = ref.make_i32({L.B}, L.kv_len);
  a.cu_q = ref.make_i32({L.B + 1}, L.cu_q);
  a.Qb = c.Qb;
  a.NQ = query_blocks(L, c.Qb).nq();
  a.mode = mode;
  a.scale = c.scale;
  a.pool = c.pool;
  a.block_score = ref.out(DType::f32, {a.NQ, c.Hi, L.max_blocks});
  ops::indexer_score(ref.device(), a);
  return ref.get(a.block_score);
}

void expect_scores(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 10; ++i) {
    const bool ok = std::isinf(want[i]) ? got[i] == -std::numeric_limits<float>::infinity()
                                        : std::fabs(got[i] - want[i]) <= 1e-6 * std::max(1.0, std::fabs(want[i]));
    if (!ok) {
      ADD_FAILURE() << what << " entry " << i << ": got " << got[i] << " want " << want[i];
      ++bad;
    }
  }
}

const std::vector<int> kIdxQLens = {3, 0, 1, 6, 4};
const std::vector<int> kIdxKvLens = {3, 7, 20, 37, 16};

TEST(CpuRefIndexerScore, MatchesLogitRows) {
  for (DType qt : kActDTypes)
    for (DType kt : {DType::bf16, DType::f32, DType::fp8_e4m3})
      for (ops::Pool pool : {ops::Pool::max, ops::Pool::lse})
        for (int Qb : {1, 2, 8}) {
          const bool with_scale = kt == DType::fp8_e4m3 && Qb != 2;  // fp8 with and without scales
          IdxCase c = make_case(kIdxQLens, kIdxKvLens, 8, 2, 16, qt, kt, with_scale, 40 + Qb);
          c.pool = pool;
          c.Qb = Qb;
          Ref ref;
          expect_scores(run(ref, c), oracle(c),
                        std::string(hal::dtype_name(qt)) + "/" + hal::dtype_name(kt) + " " + ops::pool_name(pool) +
                            " Qb=" + std::to_string(Qb) + (with_scale ? " scaled" : ""));
        }
}

TEST(CpuRefIndexerScore, Nvfp4KeysMatchLogitRows) {
  for (DType qt : kActDTypes)
    for (ops::Pool pool : {ops::Pool::max, ops::Pool::lse})
      for (int Qb : {1, 4}) {
        IdxCase c = make_case(kIdxQLens, kIdxKvLens, 8, 2, 32, qt, DType::bf16, false, 60 + Qb);
        make_nvfp4_keys(c, 61 + Qb);
        c.pool = pool;
        c.Qb = Qb;
        Ref ref;
        expect_scores(
            run(ref, c), oracle(c),
            std::string("nvfp4/") + hal::dtype_name(qt) + " " + ops::pool_name(pool) + " Qb=" + std::to_string(Qb));
      }
}

TEST(CpuRefIndexerScore, SharedModeOneHeadOddBlockSize) {
  IdxCase c = make_case({5, 2}, {23, 2}, 5, 1, 12, DType::bf16, DType::bf16, false, 9);
  c.Qb = 4;
  c.scale = 0.25f;
  Ref ref;
  expect_scores(run(ref, c, ops::SelectionMode::shared), oracle(c), "shared");
}

// Di = 1, scale 1: logits are qi * ki. kv_len 4, q_len 2 (positions 2, 3), Bs 2,
// max_blocks 3; ki = {1, 2, 3, -1}, qi = {1} (pos 2) and {2} (pos 3).
TEST(CpuRefIndexerScore, HandWorked) {
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e3 = std::exp(3.0);
  const double ninf = -kInf;
  struct Expect {
    int Qb;
    ops::Pool pool;
    std::vector<double> score;
  };
  const std::vector<Expect> cases = {
      // Qb 1: pos 2 -> block 0 {1, 2}, block 1 {3}; pos 3 -> block 0 {2, 4}, block 1 {6, -2}.
      {1, ops::Pool::max, {2, 3, ninf, 4, 6, ninf}},
      {1, ops::Pool::lse, {std::log(e1 + e2), 3, ninf, std::log(e2 + e2 * e2), std::log(e3 * e3 + 1 / e2), ninf}},
      // Qb 2 and 4: both queries form one query block; the maximum over them.
      {2, ops::Pool::max, {4, 6, ninf}},
      {4, ops::Pool::lse, {std::log(e2 + e2 * e2), std::log(e3 * e3 + 1 / e2), ninf}},
  };
  for (const Expect& x : cases) {
    Ref ref;
    ops::IndexerScoreArgs a;
    a.qi = ref.make(DType::f32, {2, 1, 1}, {1, 2});
    a.ki_cache = ref.make(DType::f32, {3, 2, 1}, {kNaN, kNaN, 3, -1, 1, 2});  // page 0 unused
    a.block_table = ref.make_i32({1, 3}, {2, 1, 99});
    a.kv_len = ref.make_i32({1}, {4});
    a.cu_q = ref.make_i32({2}, {0, 2});
    a.Qb = x.Qb;
    a.NQ = x.Qb == 1 ? 2 : 1;
    a.scale = 1.0f;
    a.pool = x.pool;
    a.block_score = ref.out(DType::f32, {a.NQ, 1, 3});
    ops::indexer_score(ref.device(), a);
    expect_scores(ref.get(a.block_score), x.score, "hand Qb=" + std::to_string(x.Qb));
  }
}

TEST(CpuRefIndexerScore, Fp8KeysWithScale) {
  // One key row of fp8 values with a per-token scale: the logit uses the dequantised value
  // times the scale. qi = {1, 1}, ki = {1.5, -0.25} (exact in e4m3), scale 0.5 -> 0.625.
  Ref ref;
  ops::IndexerScoreArgs a;
  a.qi = ref.make(DType::bf16, {1, 1, 2}, {1, 1});
  a.ki_cache = ref.make(DType::fp8_e4m3, {1, 2, 2}, {1.5f, -0.25f, kNaN, kNaN});
  a.ki_scale = ref.make(DType::f32, {1, 2}, {0.5f, kNaN});
  a.block_table = ref.make_i32({1, 1}, {0});
  a.kv_len = ref.make_i32({1}, {1});
  a.cu_q = ref.make_i32({2}, {0, 1});
  a.NQ = 1;
  a.scale = 1.0f;
  a.block_score = ref.out(DType::f32, {1, 1, 1});
  ops::indexer_score(ref.device(), a);
  EXPECT_EQ(ref.get(a.block_score)[0], 0.625f);
}

}  // namespace
}  // namespace msa::cpu_ref_test
