// dense_attention and sparse_block_attention of cpu-ref against a second computation:
// per sequence and head, the full logit matrix over the logical (unpaged) KV sequence,
// masked (causal, valid, selected blocks), softmaxed and multiplied by V.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::cpu_ref_test {
namespace {

struct AttnCase {
  Layout L;
  int Hq = 4, Hkv = 2, D = 16, Qb = 1, K = 0;
  DType t = DType::f32;
  bool shared = false;
  float scale = 0.0f;                          // 0 = 1/sqrt(D)
  std::vector<float> q;                        // [T][Hq][D]
  std::vector<std::vector<float>> klog, vlog;  // per sequence [Hkv][kv_len][D]
  std::vector<float> kpaged, vpaged;           // [P][Hkv][Bs][D], NaN outside valid slots
  QueryBlocks qbs;
  std::vector<int32_t> block_idx;  // [NQ][Hs][K]

  int Hs() const { return shared ? 1 : Hkv; }
  double eff_scale() const {
    return scale != 0.0f ? scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  }
};

AttnCase make_case(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, int Hq, int Hkv, int D,
                   DType t, uint64_t seed) {
  AttnCase c;
  c.L = make_layout(q_lens, kv_lens, Bs, seed);
  c.Hq = Hq;
  c.Hkv = Hkv;
  c.D = D;
  c.t = t;
  c.q = random_values(static_cast<size_t>(c.L.T) * Hq * D, t, seed + 1, -2.f, 2.f);
  c.kpaged = paged_values(c.L, Hkv, D, t, seed + 2, c.klog, -2.f, 2.f);
  c.vpaged = paged_values(c.L, Hkv, D, t, seed + 3, c.vlog);
  return c;
}

// A random selection per (query block, selection head): some valid blocks (some of them
// in the query's future), padding -1, junk ids past the sequence, in shuffled order.
void random_selection(AttnCase& c, int Qb, int K, bool shared, uint64_t seed) {
  c.Qb = Qb;
  c.K = K;
  c.shared = shared;
  c.qbs = query_blocks(c.L, Qb);
  cases::Rng rng(seed);
  c.block_idx.clear();
  for (int64_t n = 0; n < c.qbs.nq(); ++n) {
    const int nb = c.L.n_blocks(c.qbs.seq[n]);
    for (int hs = 0; hs < c.Hs(); ++hs) {
      std::vector<int32_t> row;
      for (int b = 0; b < nb && static_cast<int>(row.size()) < K; ++b)
        if (rng.chance(0.6)) row.push_back(b);
      while (static_cast<int>(row.size()) < K) {
        const int64_t r = rng.below(3);
        row.push_back(r == 0 ? -1 : r == 1 ? nb + static_cast<int32_t>(rng.below(5)) : -9);
      }
      rng.shuffle(row);
      c.block_idx.insert(c.block_idx.end(), row.begin(), row.end());
    }
  }
}

// The oracle. sparse = false: every causal token.
void oracle(const AttnCase& c, bool sparse, std::vector<double>& out, std::vector<double>& lse) {
  const int G = c.Hq / c.Hkv, D = c.D;
  out.assign(static_cast<size_t>(c.L.T) * c.Hq * D, 0.0);
  lse.assign(static_cast<size_t>(c.L.T) * c.Hq, 0.0);
  std::vector<double> logits, values, row;
  for (int64_t t = 0; t < c.L.T; ++t) {
    const int b = c.L.tok_seq[t];
    const int64_t pos = c.L.tok_pos[t];
    const int kv = c.L.kv_len[b];
    for (int h = 0; h < c.Hq; ++h) {
      const int g = h / G;
      logits.assign(static_cast<size_t>(kv), -kInf);
      values.assign(static_cast<size_t>(kv) * D, 0.0);
      for (int s = 0; s < kv; ++s) {
        const float* kr = &c.klog[b][(static_cast<size_t>(g) * kv + s) * D];
        const float* vr = &c.vlog[b][(static_cast<size_t>(g) * kv + s) * D];
        for (int d = 0; d < D; ++d) values[static_cast<size_t>(s) * D + d] = vr[d];
        bool allowed = s <= pos;
        if (sparse) {
          const int32_t* sel = &c.block_idx[(c.qbs.qb_of[t] * c.Hs() + (c.shared ? 0 : g)) * c.K];
          allowed = allowed && std::find(sel, sel + c.K, s / c.L.Bs) != sel + c.K;
        }
        if (!allowed) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += static_cast<double>(c.q[(t * c.Hq + h) * D + d]) * kr[d];
        logits[s] = c.eff_scale() * dot;
      }
      lse[t * c.Hq + h] = softmax_row(logits, values, D, row);
      std::copy(row.begin(), row.end(), out.begin() + (t * c.Hq + h) * D);
    }
  }
}

struct Tensors {
  hal::Tensor q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, out, lse;
};

Tensors upload(Ref& ref, const AttnCase& c) {
  const Layout& L = c.L;
  Tensors x;
  x.q = ref.make(c.t, {L.T, c.Hq, c.D}, c.q);
  x.k_cache = ref.make(c.t, {L.P, c.Hkv, L.Bs, c.D}, c.kpaged);
  x.v_cache = ref.make(c.t, {L.P, c.Hkv, L.Bs, c.D}, c.vpaged);
  x.block_table = ref.make_i32({L.B, L.max_blocks}, L.block_table);
  x.kv_len = ref.make_i32({L.B}, L.kv_len);
  x.cu_q = ref.make_i32({L.B + 1}, L.cu_q);
  if (c.K > 0) x.block_idx = ref.make_i32({c.qbs.nq(), c.Hs(), c.K}, c.block_idx);
  x.out = ref.out(c.t, {L.T, c.Hq, c.D});
  x.lse = ref.out(DType::f32, {L.T, c.Hq});
  return x;
}

void run_dense(Ref& ref, const AttnCase& c, Tensors& x) {
  ops::DenseAttentionArgs a;
  a.q = x.q, a.k_cache = x.k_cache, a.v_cache = x.v_cache, a.block_table = x.block_table;
  a.kv_len = x.kv_len, a.cu_q = x.cu_q, a.scale = c.scale, a.out = x.out, a.lse = x.lse;
  ops::dense_attention(ref.device(), a);
}

ops::SparseAttentionArgs sparse_args(const AttnCase& c, const Tensors& x) {
  ops::SparseAttentionArgs a;
  a.q = x.q, a.k_cache = x.k_cache, a.v_cache = x.v_cache, a.block_table = x.block_table;
  a.kv_len = x.kv_len, a.cu_q = x.cu_q, a.Qb = c.Qb, a.NQ = c.qbs.nq();
  a.mode = c.shared ? ops::SelectionMode::shared : ops::SelectionMode::per_kv_head;
  a.block_idx = x.block_idx, a.scale = c.scale, a.out = x.out, a.lse = x.lse;
  return a;
}

std::string label(const AttnCase& c) {
  return std::string(hal::dtype_name(c.t)) + " Hq=" + std::to_string(c.Hq) + " Hkv=" + std::to_string(c.Hkv) +
         " Bs=" + std::to_string(c.L.Bs) + " Qb=" + std::to_string(c.Qb) + (c.shared ? " shared" : " per_kv_head");
}

// Varlen: a prefill, an empty sequence, decode steps, chunked prefills (the last one's
// query blocks span several KV blocks when Qb > Bs), kv_len not a multiple of Bs, a
// sequence exactly one block long.
const std::vector<int> kQLens = {3, 0, 1, 5, 4, 1, 21};
const std::vector<int> kKvLens = {3, 7, 20, 37, 8, 16, 43};

TEST(CpuRefDenseAttention, MatchesFullLogitMatrix) {
  for (DType t : kActDTypes)
    for (auto [Hq, Hkv] : {std::pair{4, 2}, {3, 3}, {8, 1}})
      for (int Bs : {8, 5}) {
        Ref ref;
        AttnCase c = make_case(kQLens, kKvLens, Bs, Hq, Hkv, 16, t, 100 + Bs * 7 + Hq);
        Tensors x = upload(ref, c);
        run_dense(ref, c, x);
        std::vector<double> want_out, want_lse;
        oracle(c, false, want_out, want_lse);
        expect_attention(ref.get(x.out), ref.get(x.lse), want_out, want_lse, c.D, t, "dense " + label(c));
      }
}

TEST(CpuRefDenseAttention, ExplicitScaleAndOddHeadDim) {
  Ref ref;
  AttnCase c = make_case({2, 6}, {9, 6}, 4, 4, 2, 7, DType::f32, 7);
  c.scale = 0.37f;
  Tensors x = upload(ref, c);
  run_dense(ref, c, x);
  std::vector<double> want_out, want_lse;
  oracle(c, false, want_out, want_lse);
  expect_attention(ref.get(x.out), ref.get(x.lse), want_out, want_lse, c.D, c.t, "dense scale");
}

// One query, two keys, worked by hand: logits {1, 0}.
TEST(CpuRefDenseAttention, HandWorked) {
  Ref ref;
  ops::DenseAttentionArgs a;
  a.q = ref.make(DType::f32, {1, 1, 2}, {1, 0});
  // One page, Bs = 4: slots 0, 1 valid, 2, 3 slack (NaN).
  a.k_cache = ref.make(DType::f32, {1, 1, 4, 2}, {1, 0, 0, 1, kNaN, kNaN, kNaN, kNaN});
  a.v_cache = ref.make(DType::f32, {1, 1, 4, 2}, {1, 2, 3, 4, kNaN, kNaN, kNaN, kNaN});
  a.block_table = ref.make_i32({1, 1}, {0});
  a.kv_len = ref.make_i32({1}, {2});
  a.cu_q = ref.make_i32({2}, {0, 1});
  a.scale = 1.0f;
  a.out = ref.out(DType::f32, {1, 1, 2});
  a.lse = ref.out(DType::f32, {1, 1});
  ops::dense_attention(ref.device(), a);
  const double e = std::exp(1.0), p0 = e / (e + 1), p1 = 1 / (e + 1);
  const auto out = ref.get(a.out);
  EXPECT_NEAR(out[0], p0 * 1 + p1 * 3, 1e-6);
  EXPECT_NEAR(out[1], p0 * 2 + p1 * 4, 1e-6);
  EXPECT_NEAR(ref.get(a.lse)[0], std::log(e + 1), 1e-6);
}

TEST(CpuRefDenseAttention, EmptyBatch) {
  Ref ref;
  AttnCase c = make_case({}, {}, 4, 2, 1, 8, DType::bf16, 3);
  Tensors x = upload(ref, c);
  EXPECT_NO_THROW(run_dense(ref, c, x));
  AttnCase z = make_case({0, 0}, {5, 0}, 4, 2, 1, 8, DType::bf16, 3);  // T = 0, B = 2
  Tensors y = upload(ref, z);
  EXPECT_NO_THROW(run_dense(ref, z, y));
}

TEST(CpuRefSparseAttention, MatchesMaskedLogitMatrix) {
  for (DType t : kActDTypes)
    for (bool shared : {false, true})
      for (int Qb : {1, 4, 16})
        for (auto [Hq, Hkv] : {std::pair{4, 2}, {2, 2}}) {
          Ref ref;
          const uint64_t seed = 1000 + Qb * 13 + Hq + (shared ? 500 : 0);
          AttnCase c = make_case(kQLens, kKvLens, 8, Hq, Hkv, 16, t, seed);
          random_selection(c, Qb, 4, shared, seed + 9);
          Tensors x = upload(ref, c);
          ops::sparse_block_attention(ref.device(), sparse_args(c, x));
          std::vector<double> want_out, want_lse;
          oracle(c, true, want_out, want_lse);
          expect_attention(ref.get(x.out), ref.get(x.lse), want_out, want_lse, c.D, t, "sparse " + label(c));
        }
}

TEST(CpuRefSparseAttention, AllBlocksSelectedEqualsDense) {
  // Selecting every block (ascending, so rows are summed in dense's order) must reproduce
  // dense attention bit for bit; entries past a sequence's last block contribute nothing.
  Ref ref;
  AttnCase c = make_case(kQLens, kKvLens, 8, 4, 2, 16, DType::f32, 77);
  random_selection(c, 4, 6, false, 1);
  for (int64_t n = 0; n < c.qbs.nq(); ++n)
    for (int hs = 0; hs < c.Hs(); ++hs)
      for (int j = 0; j < c.K; ++j) c.block_idx[(n * c.Hs() + hs) * c.K + j] = j;
  Tensors x = upload(ref, c);
  ops::sparse_block_attention(ref.device(), sparse_args(c, x));
  Tensors y = upload(ref, c);
  run_dense(ref, c, y);
  EXPECT_EQ(ref.get(x.out), ref.get(y.out));
  EXPECT_EQ(ref.get(x.lse), ref.get(y.lse));
}

TEST(CpuRefSparseAttention, EmptySetGivesZeroAndMinusInf) {
  // kv_len 12, Bs 4, queries at pos 4..11, each selecting {2, 7, -1}: 7 is past the last
  // block and -1 is padding, so queries at pos 4..7 (block 2 in their future) attend to
  // nothing, and those at pos 8..11 see part of block 2.
  Ref ref;
  AttnCase c = make_case({8}, {12}, 4, 2, 1, 8, DType::bf16, 5);
  c.Qb = 1;
  c.K = 3;
  c.qbs = query_blocks(c.L, 1);
  c.block_idx.assign(static_cast<size_t>(c.qbs.nq()) * c.K, -1);
  for (int64_t n = 0; n < c.qbs.nq(); ++n) {
    c.block_idx[n * c.K] = 2;
    c.block_idx[n * c.K + 1] = 7;
  }
  Tensors x = upload(ref, c);
  ops::sparse_block_attention(ref.device(), sparse_args(c, x));
  const auto out = ref.get(x.out), lse = ref.get(x.lse);
  for (int64_t t = 0; t < c.L.T; ++t)
    for (int h = 0; h < c.Hq; ++h) {
      const bool empty = c.L.tok_pos[t] < 8;
      if (empty) {
        EXPECT_EQ(lse[t * c.Hq + h], -std::numeric_limits<float>::infinity());
        for (int d = 0; d < c.D; ++d) EXPECT_EQ(out[(t * c.Hq + h) * c.D + d], 0.0f);
      } else {
        EXPECT_TRUE(std::isfinite(lse[t * c.Hq + h]));
      }
    }
  std::vector<double> want_out, want_lse;
  oracle(c, true, want_out, want_lse);
  expect_attention(out, lse, want_out, want_lse, c.D, c.t, "empty set");
}

TEST(CpuRefSparseAttention, BlockOrderDoesNotMatter) {
  Ref ref;
  AttnCase c = make_case({4, 2}, {30, 17}, 4, 4, 2, 8, DType::f32, 21);
  random_selection(c, 2, 4, false, 3);
  Tensors x = upload(ref, c);
  ops::sparse_block_attention(ref.device(), sparse_args(c, x));
  for (int64_t r = 0; r < static_cast<int64_t>(c.block_idx.size()); r += c.K)
    std::sort(c.block_idx.begin() + r, c.block_idx.begin() + r + c.K);
  Tensors y = upload(ref, c);
  ops::sparse_block_attention(ref.device(), sparse_args(c, y));
  const auto a = ref.get(x.out), b = ref.get(y.out);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * std::max(1.0f, std::fabs(a[i])));
}

}  // namespace
}  // namespace msa::cpu_ref_test
