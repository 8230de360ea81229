// Results of the cpu backend are bitwise identical for any thread count: work is split
// at fixed boundaries and partial results are merged in a fixed order. Runs the split
// decode path, the unsplit prefill path, the indexer and matmul with 1, 2 and 5 threads.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/cpu/cpu_util.h"

namespace msa::cpu_test {
namespace {

class ThreadCounts : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("MSA_CPU_THREADS"); }
};

// Runs fn with each thread count and expects identical bytes from every run.
template <typename Fn>
void expect_same_for_thread_counts(Fn fn, const std::string& what) {
  set_threads(1);
  const std::vector<hal::HostTensor> base = fn();
  for (int n : {2, 5}) {
    set_threads(n);
    const std::vector<hal::HostTensor> got = fn();
    ASSERT_EQ(got.size(), base.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bytes(got[i], base[i])) << what << ": output " << i << " differs with " << n << " threads";
  }
}

TEST_F(ThreadCounts, AttentionAndIndexerAreBitwiseReproducible) {
  MSA_REQUIRE_CPU_BACKEND();
  // MSA_TEST_QUICK (CI's ThreadSanitizer job): a smaller prefill, same code paths.
  const bool quick = std::getenv("MSA_TEST_QUICK") != nullptr;
  const int pq = quick ? 150 : 600, pkv = quick ? 260 : 700;
  for (auto shape : {std::pair<std::vector<int>, std::vector<int>>{{1, 1}, {3000, 900}},  // split decode
                     std::pair<std::vector<int>, std::vector<int>>{{pq}, {pkv}}}) {       // prefill
    const Layout L = make_layout(shape.first, shape.second, 128, 9);
    const int Hq = 16, Hkv = 1, D = 128, Di = 128, Hi = 1;
    const hal::HostTensor q = host(DType::bf16, {L.T, Hq, D}, random_values(static_cast<size_t>(L.T) * Hq * D, 1));
    const hal::HostTensor kc = host(DType::bf16, {L.P, Hkv, L.Bs, D}, paged_values(L, Hkv, D, 2));
    const hal::HostTensor vc = host(DType::bf16, {L.P, Hkv, L.Bs, D}, paged_values(L, Hkv, D, 3));
    const hal::HostTensor qi = host(DType::bf16, {L.T, Hi, Di}, random_values(static_cast<size_t>(L.T) * Hi * Di, 4));
    const hal::HostTensor ki = host(DType::bf16, {L.P, L.Bs, Di}, paged_values(L, 1, Di, 5));
    const hal::HostTensor bt = host_i32({L.B, L.max_blocks}, L.block_table);
    const hal::HostTensor kv = host_i32({L.B}, L.kv_len), cu = host_i32({L.B + 1}, L.cu_q);
    const int64_t nq = L.nq(1);
    expect_same_for_thread_counts(
        [&] {
          Dev d("cpu");
          ops::DenseAttentionArgs a;
          a.q = d.put(q);
          a.k_cache = d.put(kc);
          a.v_cache = d.put(vc);
          a.block_table = d.put(bt);
          a.kv_len = d.put(kv);
          a.cu_q = d.put(cu);
          a.out = d.out(DType::bf16, {L.T, Hq, D});
          a.lse = d.out(DType::f32, {L.T, Hq});
          ops::dense_attention(d.device(), a);
          ops::IndexerScoreArgs s;
          s.qi = d.put(qi);
          s.ki_cache = d.put(ki);
          s.block_table = a.block_table;
          s.kv_len = a.kv_len;
          s.cu_q = a.cu_q;
          s.NQ = nq;
          s.mode = ops::SelectionMode::shared;
          s.block_score = d.out(DType::f32, {nq, Hi, L.max_blocks});
          ops::indexer_score(d.device(), s);
          ops::BlockTopkArgs t;
          t.block_score = s.block_score;
          t.kv_len = a.kv_len;
          t.cu_q = a.cu_q;
          t.NQ = nq;
          t.Bs = L.Bs;
          t.k = 4;
          t.block_idx = d.out(DType::i32, {nq, 1, 4});
          t.block_cnt = d.out(DType::i32, {nq, 1});
          ops::block_topk(d.device(), t);
          ops::SparseAttentionArgs sp;
          sp.q = a.q;
          sp.k_cache = a.k_cache;
          sp.v_cache = a.v_cache;
          sp.block_table = a.block_table;
          sp.kv_len = a.kv_len;
          sp.cu_q = a.cu_q;
          sp.NQ = nq;
          sp.mode = ops::SelectionMode::shared;
          sp.block_idx = t.block_idx;
          sp.out = d.out(DType::bf16, {L.T, Hq, D});
          sp.lse = d.out(DType::f32, {L.T, Hq});
          ops::sparse_block_attention(d.device(), sp);
          return std::vector<hal::HostTensor>{d.get(a.out),       d.get(a.lse),  d.get(s.block_score),
                                              d.get(t.block_idx), d.get(sp.out), d.get(sp.lse)};
        },
        "T=" + std::to_string(L.T));
  }
}

TEST_F(ThreadCounts, MatmulIsBitwiseReproducible) {
  MSA_REQUIRE_CPU_BACKEND();
  const hal::HostTensor x = host(DType::bf16, {100, 700}, random_values(70000, 1));
  const hal::HostTensor w = host(DType::bf16, {300, 700}, random_values(210000, 2));
  expect_same_for_thread_counts(
      [&] {
        Dev d("cpu");
        ops::MatmulArgs a;
        a.x = d.put(x);
        a.w = d.put(w);
        a.y = d.out(DType::bf16, {100, 300});
        ops::matmul(d.device(), a);
        return std::vector<hal::HostTensor>{d.get(a.y)};
      },
      "matmul");
}

}  // namespace
}  // namespace msa::cpu_test
