// block_topk on tie-heavy scores (equal values, -0/+0, NaN, +-inf, rows longer than a
// workgroup) must equal cpu-ref exactly, and attention results must be bitwise
// reproducible run to run.
#include <cmath>
#include <limits>
#include <random>

#include "ops/ops.h"
#include "tests/vulkan/vk_test_util.h"

namespace msa::vulkan_test {
namespace {

struct TopkInputs {
  hal::HostTensor score, kv_len, cu_q;
  int64_t NQ = 0;
};

// B sequences of q_len queries at the end of kv_len tokens; scores drawn from a small
// set so that ties, signed zeros, NaN and infinities are everywhere.
TopkInputs make_topk(const std::vector<int32_t>& q_len, const std::vector<int32_t>& kv_len, int Qb, int64_t MB,
                     int64_t Hs, uint32_t seed) {
  TopkInputs in;
  const int64_t B = static_cast<int64_t>(kv_len.size());
  in.kv_len = hal::HostTensor(DType::i32, {B});
  in.cu_q = hal::HostTensor(DType::i32, {B + 1});
  in.cu_q.data<int32_t>()[0] = 0;
  std::vector<int32_t> cu(B + 1, 0);
  for (int64_t b = 0; b < B; ++b) {
    in.kv_len.data<int32_t>()[b] = kv_len[b];
    cu[b + 1] = cu[b] + q_len[b];
    in.cu_q.data<int32_t>()[b + 1] = cu[b + 1];
    if (q_len[b] > 0) in.NQ += (kv_len[b] - 1) / Qb - (kv_len[b] - q_len[b]) / Qb + 1;
  }
  in.score = hal::HostTensor(DType::f32, {in.NQ, Hs, MB});
  const float inf = std::numeric_limits<float>::infinity();
  const float pool[] = {0.0f, -0.0f, 1.0f, 1.0f, 2.5f, -1.0f, std::nanf(""), -inf, inf, 0.5f, 0.5f, 3.0f};
  std::mt19937 rng(seed);
  float* s = in.score.data<float>();
  for (int64_t i = 0; i < in.score.numel(); ++i) {
    // Mostly ties; sometimes a distinct value.
    s[i] = (rng() % 4 == 0) ? static_cast<float>(rng() % 1000) / 7.0f : pool[rng() % 12];
  }
  return in;
}

class Determinism : public VulkanTest {};

TEST_F(Determinism, BlockTopkMatchesReferenceOnTies) {
  auto ref = hal::create_device("cpu-ref");
  struct Shape {
    std::vector<int32_t> q_len, kv_len;
    int Qb, Bs, k, n_sink, n_local;
    int64_t MB, Hs;
  };
  const Shape shapes[] = {
      {{1, 1, 3}, {640, 64, 333}, 1, 4, 16, 0, 1, 200, 2},  // rows longer than a workgroup
      {{5, 1}, {1000, 37}, 1, 4, 64, 2, 2, 260, 1},         // k = 64, sinks, 2 local blocks
      {{40}, {900}, 8, 4, 12, 1, 1, 230, 4},                // Qb = 8 > Bs: several forced locals
      {{1}, {4}, 1, 4, 3, 0, 0, 8, 1},                      // nvalid <= k
  };
  uint32_t seed = 1;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE("k=" + std::to_string(sh.k) + " MB=" + std::to_string(sh.MB));
    const TopkInputs in = make_topk(sh.q_len, sh.kv_len, sh.Qb, sh.MB, sh.Hs, seed++);
    std::vector<std::vector<int32_t>> results;
    for (hal::Device* d : {&dev(), ref.get()}) {
      auto score = hal::to_device(*d, in.score);
      auto kvl = hal::to_device(*d, in.kv_len);
      auto cuq = hal::to_device(*d, in.cu_q);
      auto idx = d->alloc_tensor(DType::i32, {in.NQ, sh.Hs, sh.k});
      auto cnt = d->alloc_tensor(DType::i32, {in.NQ, sh.Hs});
      d->stream().fill_bytes(idx.tensor, 0xFF);
      ops::BlockTopkArgs a;
      a.block_score = score.tensor;
      a.kv_len = kvl.tensor;
      a.cu_q = cuq.tensor;
      a.Qb = sh.Qb;
      a.NQ = in.NQ;
      a.Bs = sh.Bs;
      a.k = sh.k;
      a.n_sink = sh.n_sink;
      a.n_local = sh.n_local;
      a.block_idx = idx.tensor;
      a.block_cnt = cnt.tensor;
      ops::block_topk(*d, a);
      d->stream().synchronize();
      hal::HostTensor hi = hal::to_host(*d, idx.tensor), hc = hal::to_host(*d, cnt.tensor);
      std::vector<int32_t> r(hi.data<int32_t>(), hi.data<int32_t>() + hi.numel());
      r.insert(r.end(), hc.data<int32_t>(), hc.data<int32_t>() + hc.numel());
      results.push_back(std::move(r));
    }
    EXPECT_EQ(results[0], results[1]);
  }
}

TEST_F(Determinism, SparseAttentionIsBitwiseReproducible) {
  const int64_t T = 3, Hq = 8, Hkv = 2, D = 80, Bs = 64, P = 6, MB = 3, k = 2;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  ops::SparseAttentionArgs a;
  a.q = make(DType::bf16, {T, Hq, D}, rnd(T * Hq * D));
  a.k_cache = make(DType::bf16, {P, Hkv, Bs, D}, rnd(P * Hkv * Bs * D));
  a.v_cache = make(DType::bf16, {P, Hkv, Bs, D}, rnd(P * Hkv * Bs * D));
  a.block_table = make_i32({2, MB}, {4, 1, 3, 0, 5, 2});
  a.kv_len = make_i32({2}, {150, 100});
  a.cu_q = make_i32({3}, {0, 2, 3});
  a.Qb = 1;
  a.NQ = 3;
  a.block_idx = make_i32({3, Hkv, k}, {0, 2, 1, 2, 0, -1, 2, -1, 0, 1, 1, -1});
  a.out = out(DType::bf16, {T, Hq, D});
  a.lse = out(DType::f32, {T, Hq});
  ops::sparse_block_attention(dev(), a);
  const auto out1 = bytes(a.out), lse1 = bytes(a.lse);
  dev().stream().fill_bytes(a.out, 0xFF);
  dev().stream().fill_bytes(a.lse, 0xFF);
  ops::sparse_block_attention(dev(), a);
  EXPECT_EQ(bytes(a.out), out1);
  EXPECT_EQ(bytes(a.lse), lse1);
  for (float v : get(a.lse)) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace msa::vulkan_test
