// cpu backend vs cpu-ref: dense_attention, sparse_block_attention, patch_attention_3d,
// on varlen paged batches (decode, prefill, empty sequences), every activation dtype,
// GQA groups 1..16, both selection modes and several query-block sizes. Shapes are
// chosen to take both the split (few groups, long key lists) and the unsplit paths.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/cpu/cpu_util.h"

namespace msa::cpu_test {
namespace {

struct Paged {
  Layout L;
  int Hq = 0, Hkv = 0, D = 0;
  DType t = DType::f32;
  hal::HostTensor q, k, v, bt, kv, cu;
};

Paged make_paged(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, int Hq, int Hkv, int D,
                 DType t, uint64_t seed) {
  Paged p;
  p.L = make_layout(q_lens, kv_lens, Bs, seed);
  p.Hq = Hq;
  p.Hkv = Hkv;
  p.D = D;
  p.t = t;
  p.q = host(t, {p.L.T, Hq, D}, random_values(static_cast<size_t>(p.L.T) * Hq * D, seed + 1, -2.f, 2.f));
  p.k = host(t, {p.L.P, Hkv, Bs, D}, paged_values(p.L, Hkv, D, seed + 2, -2.f, 2.f));
  p.v = host(t, {p.L.P, Hkv, Bs, D}, paged_values(p.L, Hkv, D, seed + 3));
  p.bt = host_i32({p.L.B, p.L.max_blocks}, p.L.block_table);
  p.kv = host_i32({p.L.B}, p.L.kv_len);
  p.cu = host_i32({p.L.B + 1}, p.L.cu_q);
  return p;
}

struct Result {
  hal::HostTensor out, lse;
};

Result run_dense(Dev& d, const Paged& p) {
  ops::DenseAttentionArgs a;
  a.q = d.put(p.q);
  a.k_cache = d.put(p.k);
  a.v_cache = d.put(p.v);
  a.block_table = d.put(p.bt);
  a.kv_len = d.put(p.kv);
  a.cu_q = d.put(p.cu);
  a.out = d.out(p.t, {p.L.T, p.Hq, p.D});
  a.lse = d.out(DType::f32, {p.L.T, p.Hq});
  ops::dense_attention(d.device(), a);
  return {d.get(a.out), d.get(a.lse)};
}

// A random selection per (query block, selection head): distinct valid blocks (some in
// the future of the query), -1 padding and ids past the sequence, in shuffled order.
hal::HostTensor random_selection(const Paged& p, int Qb, int K, int Hs, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int32_t> idx;
  for (int b = 0; b < p.L.B; ++b) {
    if (p.L.q_len[b] == 0) continue;
    const int64_t first = p.L.kv_len[b] - p.L.q_len[b], last = p.L.kv_len[b] - 1;
    for (int64_t n = first / Qb; n <= last / Qb; ++n)
      for (int h = 0; h < Hs; ++h) {
        std::vector<int32_t> blocks(static_cast<size_t>(p.L.n_blocks(b)));
        std::iota(blocks.begin(), blocks.end(), 0);
        std::shuffle(blocks.begin(), blocks.end(), g);
        std::vector<int32_t> row;
        for (int j = 0; j < K; ++j) {
          const int kind = static_cast<int>(g() % 8);
          if (kind == 0)
            row.push_back(-1);
          else if (kind == 1)
            row.push_back(p.L.n_blocks(b) + static_cast<int32_t>(g() % 5));
          else if (!blocks.empty()) {
            row.push_back(blocks.back());
            blocks.pop_back();
          } else
            row.push_back(-1);
        }
        idx.insert(idx.end(), row.begin(), row.end());
      }
  }
  const int64_t nq = p.L.nq(Qb);
  EXPECT_EQ(static_cast<int64_t>(idx.size()), nq * Hs * K);
  return host_i32({nq, Hs, K}, idx);
}

Result run_sparse(Dev& d, const Paged& p, int Qb, bool shared, const hal::HostTensor& sel) {
  ops::SparseAttentionArgs a;
  a.q = d.put(p.q);
  a.k_cache = d.put(p.k);
  a.v_cache = d.put(p.v);
  a.block_table = d.put(p.bt);
  a.kv_len = d.put(p.kv);
  a.cu_q = d.put(p.cu);
  a.Qb = Qb;
  a.NQ = p.L.nq(Qb);
  a.mode = shared ? ops::SelectionMode::shared : ops::SelectionMode::per_kv_head;
  a.block_idx = d.put(sel);
  a.out = d.out(p.t, {p.L.T, p.Hq, p.D});
  a.lse = d.out(DType::f32, {p.L.T, p.Hq});
  ops::sparse_block_attention(d.device(), a);
  return {d.get(a.out), d.get(a.lse)};
}

void expect_close(const Result& got, const Result& ref, const Paged& p, const std::string& what) {
  expect_out_close(got.out, ref.out, p.D, what + " out");
  expect_scores_close(got.lse, ref.lse, p.t == DType::f32, what + " lse");
}

struct DenseShape {
  std::vector<int> q_lens, kv_lens;
  int Bs, Hq, Hkv, D;
};

const DenseShape kDenseShapes[] = {
    {{1, 1, 1}, {300, 1, 1000}, 64, 16, 1, 128},   // decode, G = 16: split over the context
    {{37, 0, 130}, {100, 5, 300}, 128, 8, 2, 80},  // prefill, empty sequence, G = 4
    {{20, 3}, {200, 3}, 64, 2, 2, 64},             // G = 1, prompt-only sequence
    {{3, 70}, {129, 70}, 64, 16, 2, 64},           // G = 8, prefill from empty
    {{5, 0, 33}, {77, 0, 90}, 32, 9, 3, 40},       // odd sizes: G = 3, D = 40, Bs = 32, kv_len 0
    {{1}, {70000}, 64, 16, 1, 64},                 // 1094 blocks: chunks grow past 8 blocks
};

TEST(CpuAttention, DenseMatchesReference) {
  MSA_REQUIRE_CPU_BACKEND();
  uint64_t seed = 10;
  for (const DenseShape& s : kDenseShapes)
    for (DType t : act_dtypes()) {
      const Paged p = make_paged(s.q_lens, s.kv_lens, s.Bs, s.Hq, s.Hkv, s.D, t, seed++);
      Pair dev;
      expect_close(run_dense(dev.cpu, p), run_dense(dev.ref, p), p,
                   std::string("dense ") + hal::dtype_name(t) + " G=" + std::to_string(s.Hq / s.Hkv) +
                       " D=" + std::to_string(s.D));
    }
}

TEST(CpuAttention, DenseManyGroupsUnsplit) {
  MSA_REQUIRE_CPU_BACKEND();
  // 65 groups of 8 tokens x 16 heads: at least kSplitBelowGroups, so no context split.
  const Paged p = make_paged({520}, {600}, 128, 16, 1, 64, DType::bf16, 77);
  Pair dev;
  expect_close(run_dense(dev.cpu, p), run_dense(dev.ref, p), p, "dense unsplit");
}

TEST(CpuAttention, SparseMatchesReference) {
  MSA_REQUIRE_CPU_BACKEND();
  struct S {
    DenseShape shape;
    int Qb, K;
    bool shared;
  };
  const S shapes[] = {
      {{{1, 1}, {2000, 700}, 128, 16, 4, 128}, 1, 16, false},  // M3 decode
      {{{1, 1}, {2000, 700}, 128, 16, 4, 128}, 1, 16, true},
      {{{40, 0, 9}, {300, 4, 9}, 64, 8, 2, 80}, 1, 4, false},  // Qb = 1 prefill
      {{{40, 9}, {300, 70}, 64, 8, 2, 64}, 4, 5, true},
      {{{130, 17}, {400, 17}, 64, 4, 4, 64}, 64, 6, false},  // Qb = 64, G = 1
  };
  uint64_t seed = 100;
  for (const S& s : shapes)
    for (DType t : act_dtypes()) {
      const DenseShape& d = s.shape;
      const Paged p = make_paged(d.q_lens, d.kv_lens, d.Bs, d.Hq, d.Hkv, d.D, t, seed++);
      const hal::HostTensor sel = random_selection(p, s.Qb, s.K, s.shared ? 1 : d.Hkv, seed++);
      Pair dev;
      expect_close(run_sparse(dev.cpu, p, s.Qb, s.shared, sel), run_sparse(dev.ref, p, s.Qb, s.shared, sel), p,
                   std::string("sparse ") + hal::dtype_name(t) + " Qb=" + std::to_string(s.Qb) +
                       (s.shared ? " shared" : " per_kv_head"));
    }
}

// Qb = 1 prefill where neighbouring tokens choose nearly the same blocks (the realistic
// case): the backend merges such tokens into one group over the union of their lists,
// each row masked to its own blocks. Some tokens also list duplicates-free junk ids.
TEST(CpuAttention, SparseOverlappingSelectionsMatchReference) {
  MSA_REQUIRE_CPU_BACKEND();
  uint64_t seed = 500;
  for (int G : {16, 4, 1})
    for (DType t : act_dtypes()) {
      if (t == DType::f16) continue;  // bf16 and f32 cover the 2-byte and 4-byte paths
      const Paged p = make_paged({150, 1, 40}, {1500, 600, 40}, 64, 2 * G, 2, 64, t, seed++);
      const int K = 6;
      std::mt19937_64 g(seed++);
      std::vector<int32_t> idx;
      for (int b = 0; b < p.L.B; ++b) {
        const int nb = p.L.n_blocks(b);
        std::vector<int32_t> cur(K - 1);
        for (auto& c : cur) c = static_cast<int32_t>(g() % nb);
        for (int i = 0; i < p.L.q_len[b]; ++i) {
          const int64_t pos = p.L.kv_len[b] - p.L.q_len[b] + i;
          if (g() % 4 == 0) cur[g() % cur.size()] = static_cast<int32_t>(g() % nb);  // slow drift
          for (int h = 0; h < 2; ++h) {
            std::vector<int32_t> row = cur;
            row.push_back(static_cast<int32_t>(pos / 64));  // the local block
            std::sort(row.begin(), row.end());
            row.erase(std::unique(row.begin(), row.end()), row.end());
            if (h == 1 && !row.empty()) row.back() = -1;  // heads differ a little
            while (static_cast<int>(row.size()) < K) row.push_back(g() % 3 == 0 ? nb + 1 : -1);
            idx.insert(idx.end(), row.begin(), row.end());
          }
        }
      }
      const hal::HostTensor sel = host_i32({p.L.nq(1), 2, K}, idx);
      Pair dev;
      expect_close(run_sparse(dev.cpu, p, 1, false, sel), run_sparse(dev.ref, p, 1, false, sel), p,
                   std::string("sparse overlapping ") + hal::dtype_name(t) + " G=" + std::to_string(G));
    }
}

TEST(CpuAttention, SparseEmptySelectionGivesZeroAndMinusInf) {
  MSA_REQUIRE_CPU_BACKEND();
  const Paged p = make_paged({2}, {300}, 64, 4, 2, 64, DType::f32, 5);
  const hal::HostTensor sel = host_i32({2, 2, 3}, std::vector<int32_t>(12, -1));
  Pair dev;
  const Result r = run_sparse(dev.cpu, p, 1, false, sel);
  for (float x : r.out.to_f32()) EXPECT_EQ(x, 0.0f);
  for (float x : r.lse.to_f32()) EXPECT_TRUE(std::isinf(x) && x < 0);
}

TEST(CpuAttention, BadPageIdIsAnError) {
  MSA_REQUIRE_CPU_BACKEND();
  Paged p = make_paged({1}, {200}, 64, 4, 2, 64, DType::f32, 6);
  p.bt.data<int32_t>()[1] = p.L.P + 5;
  Dev d("cpu");
  try {
    run_dense(d, p);
    ADD_FAILURE() << "expected msa::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block_table"), std::string::npos) << e.what();
  }
}

Result run_patch(Dev& d, const hal::HostTensor& q, const hal::HostTensor& k, const hal::HostTensor& v,
                 const hal::HostTensor& items, int window) {
  ops::PatchAttention3dArgs a;
  a.q = d.put(q);
  a.k = d.put(k);
  a.v = d.put(v);
  a.items = d.put(items);
  a.window = window;
  a.out = d.out(q.dtype, q.shape);
  a.lse = d.out(DType::f32, {q.shape[0], q.shape[1]});
  ops::patch_attention_3d(d.device(), a);
  return {d.get(a.out), d.get(a.lse)};
}

TEST(CpuAttention, PatchAttention3dMatchesReference) {
  MSA_REQUIRE_CPU_BACKEND();
  const std::vector<int32_t> items = {3, 6, 10, 5, 2, 2, 1, 4, 4};  // 180 + 20 + 16 tokens
  const int64_t N = 216, H = 3, D = 80;
  uint64_t seed = 300;
  for (DType t : act_dtypes())
    for (int window : {1, 2, 4}) {
      const auto n = static_cast<size_t>(N * H * D);
      const hal::HostTensor q = host(t, {N, H, D}, random_values(n, seed++, -2.f, 2.f));
      const hal::HostTensor k = host(t, {N, H, D}, random_values(n, seed++, -2.f, 2.f));
      const hal::HostTensor v = host(t, {N, H, D}, random_values(n, seed++));
      const hal::HostTensor it = host_i32({3, 3}, items);
      Pair dev;
      const Result got = run_patch(dev.cpu, q, k, v, it, window), ref = run_patch(dev.ref, q, k, v, it, window);
      const std::string what = std::string("patch ") + hal::dtype_name(t) + " window=" + std::to_string(window);
      expect_out_close(got.out, ref.out, D, what + " out");
      expect_scores_close(got.lse, ref.lse, t == DType::f32, what + " lse");
    }
}

}  // namespace
}  // namespace msa::cpu_test
