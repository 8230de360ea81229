// cpu backend vs cpu-ref: indexer_score (bf16 / f32 / fp8 keys with and without scales,
// NVFP4 keys with NaN group scales in the slack slots, max and lse pooling, decode and
// prefill paths, several Qb) and block_topk (identical output on identical scores,
// including ties, NaN, -inf, -0, sinks and locals).
#include <gtest/gtest.h>

#include "tests/cpu/cpu_util.h"

namespace msa::cpu_test {
namespace {

struct IdxCase {
  Layout L;
  int Hi = 0, Di = 0, Qb = 1;
  DType qt = DType::f32, kt = DType::bf16;
  bool with_scale = false, lse = false, shared = false;
  hal::HostTensor qi, ki, ks, bt, kv, cu;
};

IdxCase make_idx(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, int Hi, int Di, int Qb,
                 DType qt, DType kt, bool with_scale, uint64_t seed) {
  IdxCase c;
  c.L = make_layout(q_lens, kv_lens, Bs, seed);
  c.Hi = Hi;
  c.Di = Di;
  c.Qb = Qb;
  c.qt = qt;
  c.kt = kt;
  c.with_scale = with_scale || kt == DType::fp4_e2m1x2;  // NVFP4 keys always have scales
  c.bt = host_i32({c.L.B, c.L.max_blocks}, c.L.block_table);
  c.kv = host_i32({c.L.B}, c.L.kv_len);
  c.cu = host_i32({c.L.B + 1}, c.L.cu_q);
  c.qi = host(qt, {c.L.T, Hi, Di}, random_values(static_cast<size_t>(c.L.T) * Hi * Di, seed + 1, -2.f, 2.f));
  if (kt == DType::fp4_e2m1x2) {
    // NVFP4: random code bytes (every E2M1 value of both signs, -0 included) and e4m3 group
    // scales 2^[-4, 2) in valid slots; slack slots get NaN scales, which must never be read.
    c.ki = hal::HostTensor(kt, {c.L.P, Bs, Di / 2});
    std::mt19937_64 g(seed + 2);
    for (auto& b : c.ki.bytes) b = static_cast<uint8_t>(g());
    std::vector<float> e = paged_values(c.L, 1, Di / 16, seed + 3, -4.f, 2.f);
    for (float& x : e) x = std::exp2(x);  // (NaN stays NaN)
    c.ks = host(DType::fp8_e4m3, {c.L.P, Bs, Di / 16}, e);
    return c;
  }
  c.ki = host(kt, {c.L.P, Bs, Di}, paged_values(c.L, 1, Di, seed + 2, -3.f, 3.f));
  if (with_scale) {
    std::vector<float> s = paged_values(c.L, 1, 1, seed + 3, 0.01f, 0.1f);
    c.ks = host(DType::f32, {c.L.P, Bs}, s);
  }
  return c;
}

hal::HostTensor run_idx(Dev& d, const IdxCase& c) {
  ops::IndexerScoreArgs a;
  a.qi = d.put(c.qi);
  a.ki_cache = d.put(c.ki);
  if (c.with_scale) a.ki_scale = d.put(c.ks);
  a.block_table = d.put(c.bt);
  a.kv_len = d.put(c.kv);
  a.cu_q = d.put(c.cu);
  a.Qb = c.Qb;
  a.NQ = c.L.nq(c.Qb);
  a.mode = c.shared ? ops::SelectionMode::shared : ops::SelectionMode::per_kv_head;
  a.pool = c.lse ? ops::Pool::lse : ops::Pool::max;
  a.block_score = d.out(DType::f32, {a.NQ, c.Hi, c.L.max_blocks});
  ops::indexer_score(d.device(), a);
  return d.get(a.block_score);
}

TEST(CpuSelection, IndexerScoreMatchesReference) {
  MSA_REQUIRE_CPU_BACKEND();
  struct S {
    std::vector<int> q_lens, kv_lens;
    int Bs, Hi, Di, Qb;
  };
  const S shapes[] = {
      {{1, 1, 1}, {3000, 1, 130}, 128, 4, 128, 1},  // decode: dot-product path, 2 chunks
      {{2}, {700}, 64, 4, 64, 1},                   // 8 rows: still the dot path
      {{50, 0, 7}, {400, 3, 7}, 64, 4, 128, 1},     // prefill, Qb = 1: lane path
      {{50, 7}, {400, 9}, 64, 1, 64, 16},           // shared mode head, Qb = 16
      {{200}, {330}, 128, 4, 128, 128},             // Qb = 128 > group rows
      {{1, 30, 0}, {500, 61, 0}, 32, 3, 72, 2},     // odd sizes: Hi = 3, Di = 72, Bs = 32
      {{1, 30, 0}, {500, 61, 0}, 32, 3, 48, 2},     // Di = 48: three NVFP4 groups
  };
  uint64_t seed = 1000;
  for (const S& s : shapes)
    for (DType kt : {DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp4_e2m1x2})
      for (bool lse : {false, true}) {
        if (kt == DType::fp4_e2m1x2 && s.Di % 16 != 0) continue;  // NVFP4 needs Di % 16 == 0
        // (NVFP4: f32 queries with max pooling, so the tight f32 tolerance applies too)
        const DType qt = kt == DType::f32 || (kt == DType::fp4_e2m1x2 && !lse) ? DType::f32 : DType::bf16;
        IdxCase c =
            make_idx(s.q_lens, s.kv_lens, s.Bs, s.Hi, s.Di, s.Qb, qt, kt, kt == DType::fp8_e4m3 && !lse, seed++);
        c.lse = lse;
        c.shared = s.Hi == 1;
        Pair dev;
        expect_scores_close(run_idx(dev.cpu, c), run_idx(dev.ref, c), qt == DType::f32,
                            std::string("indexer keys=") + hal::dtype_name(kt) + (lse ? " lse" : " max") +
                                " Qb=" + std::to_string(s.Qb) + " Hi=" + std::to_string(s.Hi));
      }
}

hal::HostTensor topk_scores(int64_t nq, int Hs, int mb, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> v(static_cast<size_t>(nq) * Hs * mb);
  for (auto& x : v) {
    const int kind = static_cast<int>(g() % 16);
    if (kind == 0)
      x = kNaN;
    else if (kind == 1)
      x = -kInf;
    else if (kind == 2)
      x = (g() % 2) ? 0.0f : -0.0f;
    else
      x = static_cast<float>(static_cast<int>(g() % 9) - 4) * 0.5f;  // many ties
  }
  return host(DType::f32, {nq, Hs, mb}, v);
}

struct TopkResult {
  hal::HostTensor idx, cnt;
};

TopkResult run_topk(Dev& d, const Layout& L, const hal::HostTensor& scores, int Qb, int k, int n_sink, int n_local) {
  ops::BlockTopkArgs a;
  a.block_score = d.put(scores);
  a.kv_len = d.put(host_i32({L.B}, L.kv_len));
  a.cu_q = d.put(host_i32({L.B + 1}, L.cu_q));
  a.Qb = Qb;
  a.NQ = L.nq(Qb);
  a.Bs = L.Bs;
  a.k = k;
  a.n_sink = n_sink;
  a.n_local = n_local;
  a.block_idx = d.out(DType::i32, {a.NQ, scores.shape[1], k});
  a.block_cnt = d.out(DType::i32, {a.NQ, scores.shape[1]});
  ops::block_topk(d.device(), a);
  return {d.get(a.block_idx), d.get(a.block_cnt)};
}

TEST(CpuSelection, BlockTopkIdenticalToReference) {
  MSA_REQUIRE_CPU_BACKEND();
  struct S {
    std::vector<int> q_lens, kv_lens;
    int Bs, Hs, Qb, k, n_sink, n_local;
  };
  const S shapes[] = {
      {{1, 1, 1}, {8000, 100, 1000}, 128, 4, 1, 16, 0, 1},  // M3 decode
      {{300, 1}, {2000, 5}, 64, 2, 1, 8, 2, 2},             // prefill, sinks and 2 locals
      {{300}, {900}, 64, 1, 64, 12, 1, 1},                  // Qb = 64 > Bs
      {{40}, {600}, 64, 3, 4, 4, 0, 0},                     // no forced blocks at all
  };
  uint64_t seed = 2000;
  for (const S& s : shapes) {
    const Layout L = make_layout(s.q_lens, s.kv_lens, s.Bs, seed++);
    const hal::HostTensor scores = topk_scores(L.nq(s.Qb), s.Hs, L.max_blocks, seed++);
    Pair dev;
    const TopkResult got = run_topk(dev.cpu, L, scores, s.Qb, s.k, s.n_sink, s.n_local);
    const TopkResult ref = run_topk(dev.ref, L, scores, s.Qb, s.k, s.n_sink, s.n_local);
    EXPECT_TRUE(same_bytes(got.idx, ref.idx)) << "block_idx differs, k=" << s.k << " Qb=" << s.Qb;
    EXPECT_TRUE(same_bytes(got.cnt, ref.cnt)) << "block_cnt differs, k=" << s.k << " Qb=" << s.Qb;
  }
}

TEST(CpuSelection, IndexerThenTopkMatchesReferenceSelection) {
  MSA_REQUIRE_CPU_BACKEND();
  // Continuous random scores: ties are practically absent, so the selections from the
  // two backends' own scores agree exactly.
  IdxCase c = make_idx({1, 1}, {5000, 2000}, 128, 4, 128, 1, DType::f32, DType::f32, false, 31);
  Pair dev;
  const hal::HostTensor s_cpu = run_idx(dev.cpu, c), s_ref = run_idx(dev.ref, c);
  const TopkResult got = run_topk(dev.cpu, c.L, s_cpu, 1, 16, 0, 1);
  const TopkResult ref = run_topk(dev.ref, c.L, s_ref, 1, 16, 0, 1);
  EXPECT_TRUE(same_bytes(got.idx, ref.idx));
}

}  // namespace
}  // namespace msa::cpu_test
