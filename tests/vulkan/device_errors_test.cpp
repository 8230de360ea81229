// Invalid index data living on the device (page ids, lengths, cu_q, NQ, token ids,
// visual items, placeholder counts) is skipped by the Vulkan kernels, flagged, and
// raised as msa::Error naming the op and the argument at the next synchronize().
#include <cmath>

#include "ops/ops.h"
#include "tests/vulkan/vk_test_util.h"

namespace msa::vulkan_test {
namespace {

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.7f * static_cast<float>(i)) * scale;
  return v;
}

class DeviceErrors : public VulkanTest {
 protected:
  // dense_attention over one sequence of kv_len tokens, T queries, Bs = 4, P = 2 pages.
  ops::DenseAttentionArgs dense(const std::vector<int32_t>& block_table, int32_t kv_len,
                                const std::vector<int32_t>& cu_q, int64_t T) {
    const int64_t Hq = 2, Hkv = 1, D = 64, Bs = 4, P = 2;
    ops::DenseAttentionArgs a;
    a.q = make(DType::f32, {T, Hq, D}, ramp(T * Hq * D, 0.5f));
    a.k_cache = make(DType::f32, {P, Hkv, Bs, D}, ramp(P * Hkv * Bs * D, 0.3f));
    a.v_cache = make(DType::f32, {P, Hkv, Bs, D}, ramp(P * Hkv * Bs * D, 0.9f));
    a.block_table = make_i32({1, static_cast<int64_t>(block_table.size())}, block_table);
    a.kv_len = make_i32({1}, {kv_len});
    a.cu_q = make_i32({2}, cu_q);
    a.out = out(DType::f32, {T, Hq, D});
    a.lse = out(DType::f32, {T, Hq});
    return a;
  }
};

TEST_F(DeviceErrors, PageIdOutOfRange) {
  ops::dense_attention(dev(), dense({1, 7}, 6, {0, 2}, 2));  // page 7 of 2
  expect_device_error({"dense_attention", "block_table"});
}

TEST_F(DeviceErrors, NegativePageId) {
  ops::dense_attention(dev(), dense({-3, 0}, 6, {0, 2}, 2));
  expect_device_error({"block_table"});
}

TEST_F(DeviceErrors, CuQNotMatchingT) {
  ops::dense_attention(dev(), dense({1, 0}, 6, {0, 3}, 2));
  expect_device_error({"cu_q"});
}

TEST_F(DeviceErrors, KvLenShorterThanQueries) {
  ops::dense_attention(dev(), dense({1, 0}, 1, {0, 2}, 2));
  expect_device_error({"kv_len"});
}

TEST_F(DeviceErrors, KvLenPastTheBlockTable) {
  ops::dense_attention(dev(), dense({1, 0}, 9, {0, 2}, 2));  // 2 blocks of 4 hold 8 tokens
  expect_device_error({"kv_len"});
}

TEST_F(DeviceErrors, ValidDataRaisesNothing) {
  ops::DenseAttentionArgs a = dense({1, 0}, 6, {0, 2}, 2);
  ops::dense_attention(dev(), a);
  EXPECT_NO_THROW(dev().stream().synchronize());
  for (float v : get(a.out)) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(DeviceErrors, BlockTopkNQMismatch) {
  // cu_q / kv_len give 2 query blocks (Qb = 1) but NQ says 3.
  ops::BlockTopkArgs a;
  a.block_score = make(DType::f32, {3, 1, 4}, ramp(12, 1.0f));
  a.kv_len = make_i32({1}, {8});
  a.cu_q = make_i32({2}, {0, 2});
  a.Qb = 1;
  a.NQ = 3;
  a.Bs = 4;
  a.k = 2;
  a.block_idx = out(DType::i32, {3, 1, 2});
  a.block_cnt = out(DType::i32, {3, 1});
  ops::block_topk(dev(), a);
  expect_device_error({"block_topk", "NQ"});
}

TEST_F(DeviceErrors, EmbeddingIdOutOfRange) {
  ops::EmbeddingArgs a;
  a.table = make(DType::f32, {5, 8}, ramp(40, 1.0f));
  a.ids = make_i32({3}, {0, 5, 2});
  a.y = out(DType::f32, {3, 8});
  ops::embedding(dev(), a);
  expect_device_error({"embedding", "ids"});
}

TEST_F(DeviceErrors, PlaceholderCountMismatch) {
  ops::ScatterVisualArgs a;
  a.tokens = make_i32({4}, {9, 1, 9, 9});
  a.vis = make(DType::f32, {2, 8}, ramp(16, 1.0f));
  a.placeholder = 9;
  a.x = make(DType::f32, {4, 8}, ramp(32, 2.0f));
  ops::scatter_visual(dev(), a);
  expect_device_error({"scatter_visual", "vis"});
}

TEST_F(DeviceErrors, VisualItemsNotCoveringN) {
  ops::PatchAttention3dArgs a;
  const int64_t N = 3, H = 1, D = 64;
  a.q = make(DType::f32, {N, H, D}, ramp(N * H * D, 0.5f));
  a.k = make(DType::f32, {N, H, D}, ramp(N * H * D, 0.4f));
  a.v = make(DType::f32, {N, H, D}, ramp(N * H * D, 0.3f));
  a.items = make_i32({1, 3}, {1, 2, 2});  // 4 tokens, q has 3
  a.out = out(DType::f32, {N, H, D});
  a.lse = out(DType::f32, {N, H});
  ops::patch_attention_3d(dev(), a);
  expect_device_error({"patch_attention_3d", "items"});
}

TEST_F(DeviceErrors, KvAppendBadPage) {
  ops::KvAppendArgs a;
  const int64_t T = 2, Hkv = 1, D = 64, P = 2, Bs = 4;
  a.k = make(DType::bf16, {T, Hkv, D}, ramp(T * D, 1.0f));
  a.v = make(DType::bf16, {T, Hkv, D}, ramp(T * D, 2.0f));
  a.block_table = make_i32({1, 2}, {0, 11});
  a.kv_len = make_i32({1}, {6});  // tokens 4, 5: block 1, page 11
  a.cu_q = make_i32({2}, {0, 2});
  a.k_cache = make(DType::bf16, {P, Hkv, Bs, D}, std::vector<float>(P * Bs * D, 0.0f));
  a.v_cache = make(DType::bf16, {P, Hkv, Bs, D}, std::vector<float>(P * Bs * D, 0.0f));
  ops::kv_append(dev(), a);
  expect_device_error({"kv_append", "block_table"});
  // Nothing was written anywhere.
  for (float v : get(a.k_cache)) ASSERT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace msa::vulkan_test
