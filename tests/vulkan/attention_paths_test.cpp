// Attention calls with few (token, head) rows are split over the key set and merged by a
// combine pass; calls with many rows are not. Both paths must match cpu-ref (f32 NMSE
// bounds of the contract) for dense and sparse attention, with ragged sequences. Dense
// attention runs on the GQA kernel by default and on paged_attention.comp (the fallback of
// devices and shapes the GQA kernel does not take) with gqa_dense=0.
#include <cmath>
#include <random>

#include "ops/ops.h"
#include "tests/vulkan/vk_test_util.h"

namespace msa::vulkan_test {
namespace {

struct Shape {
  std::vector<int32_t> q_len, kv_len;
  int64_t Hq, Hkv, D, Bs, k;
};

class AttentionPaths : public VulkanTest {
 protected:
  void run(const Shape& sh, bool sparse) {
    auto ref = hal::create_device("cpu-ref");
    const int64_t B = static_cast<int64_t>(sh.kv_len.size());
    int64_t T = 0, MB = 0;
    std::vector<int32_t> cu{0};
    for (int64_t b = 0; b < B; ++b) {
      T += sh.q_len[b];
      cu.push_back(static_cast<int32_t>(T));
      MB = std::max<int64_t>(MB, (sh.kv_len[b] + sh.Bs - 1) / sh.Bs);
    }
    const int64_t P = B * MB;
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto fill = [&](hal::HostTensor& h) {
      for (int64_t i = 0; i < h.numel(); ++i) h.set(i, u(rng));
    };
    hal::HostTensor q(DType::f32, {T, sh.Hq, sh.D}), kc(DType::f32, {P, sh.Hkv, sh.Bs, sh.D}),
        vc(DType::f32, {P, sh.Hkv, sh.Bs, sh.D}), bt(DType::i32, {B, MB}), kvl(DType::i32, {B}),
        cuq(DType::i32, {B + 1});
    fill(q);
    fill(kc);
    fill(vc);
    for (int64_t i = 0; i < B * MB; ++i) bt.data<int32_t>()[i] = static_cast<int32_t>((i * 7) % P);  // a permutation
    std::copy(sh.kv_len.begin(), sh.kv_len.end(), kvl.data<int32_t>());
    std::copy(cu.begin(), cu.end(), cuq.data<int32_t>());
    // Sparse: every token its own query block (Qb = 1); select k blocks per KV head,
    // the local one plus a spread of earlier ones, -1 padded.
    hal::HostTensor idx(DType::i32, {T, sh.Hkv, sh.k});
    for (int64_t b = 0, t = 0; b < B; ++b) {
      for (int32_t i = 0; i < sh.q_len[b]; ++i, ++t) {
        const int64_t last = (sh.kv_len[b] - sh.q_len[b] + i) / sh.Bs;
        for (int64_t g = 0; g < sh.Hkv; ++g)
          for (int64_t j = 0; j < sh.k; ++j) {
            const int64_t c = last - j * (g + 1);
            idx.data<int32_t>()[(t * sh.Hkv + g) * sh.k + j] = c >= 0 ? static_cast<int32_t>(c) : -1;
          }
      }
    }
    std::vector<std::vector<float>> outs, lses;
    for (hal::Device* d : {&dev(), ref.get()}) {
      auto tq = hal::to_device(*d, q), tk = hal::to_device(*d, kc), tv = hal::to_device(*d, vc);
      auto tb = hal::to_device(*d, bt), tl = hal::to_device(*d, kvl), tc = hal::to_device(*d, cuq);
      auto ti = hal::to_device(*d, idx);
      auto o = d->alloc_tensor(DType::f32, {T, sh.Hq, sh.D});
      auto l = d->alloc_tensor(DType::f32, {T, sh.Hq});
      d->stream().fill_bytes(o.tensor, 0xFF);
      if (sparse) {
        ops::SparseAttentionArgs a;
        a.q = tq.tensor, a.k_cache = tk.tensor, a.v_cache = tv.tensor, a.block_table = tb.tensor;
        a.kv_len = tl.tensor, a.cu_q = tc.tensor, a.Qb = 1, a.NQ = T, a.block_idx = ti.tensor;
        a.out = o.tensor, a.lse = l.tensor;
        ops::sparse_block_attention(*d, a);
      } else {
        ops::DenseAttentionArgs a;
        a.q = tq.tensor, a.k_cache = tk.tensor, a.v_cache = tv.tensor, a.block_table = tb.tensor;
        a.kv_len = tl.tensor, a.cu_q = tc.tensor, a.out = o.tensor, a.lse = l.tensor;
        ops::dense_attention(*d, a);
      }
      d->stream().synchronize();
      outs.push_back(hal::to_host(*d, o.tensor).to_f32());
      lses.push_back(hal::to_host(*d, l.tensor).to_f32());
    }
    EXPECT_LE(nmse(outs[0], outs[1]), 1e-10);
    for (size_t i = 0; i < lses[1].size(); ++i)
      ASSERT_NEAR(lses[0][i], lses[1][i], 1e-5 * std::max(1.0f, std::fabs(lses[1][i]))) << "row " << i;
  }
};

// T * Hq = 16 rows: split over the key set (dense: per logical block; sparse: per entry).
TEST_F(AttentionPaths, DecodeSplitsMatchReference) {
  const Shape sh{{1, 1}, {700, 65}, 8, 2, 64, 64, 5};
  run(sh, false);
  run(sh, true);
}

// T * Hq = 1040 rows: one workgroup per row, no split.
TEST_F(AttentionPaths, PrefillRowsMatchReference) {
  const Shape sh{{100, 30}, {160, 30}, 8, 4, 64, 32, 3};
  run(sh, false);
  run(sh, true);
}

// The dense fallback shader (paged_attention.comp) on the shapes above.
TEST_F(AttentionPaths, DenseFallbackMatchesReference) {
  ScopedTuning scalar(dev(), "gqa_dense", "0");
  run(Shape{{1, 1}, {700, 65}, 8, 2, 64, 64, 5}, false);
  run(Shape{{100, 30}, {160, 30}, 8, 4, 64, 32, 3}, false);
}

}  // namespace
}  // namespace msa::vulkan_test
