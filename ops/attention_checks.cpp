#include "ops/attention_checks.h"

#include <cmath>
#include <string>
#include <vector>

namespace msa::ops::detail {

using hal::DType;

AttnDims check_paged_inputs(const Checker& c, const Tensor& q, const Tensor& k_cache, const Tensor* v_cache,
                            const PagedBatch& batch) {
  c.tensor(q, "q", 3, kActDtypes);
  c.tensor(k_cache, "k_cache", 4);
  c.same_dtype(k_cache, "k_cache", q, "q");
  if (v_cache != nullptr) {
    c.tensor(*v_cache, "v_cache", 4);
    c.same_shape(*v_cache, "v_cache", k_cache, "k_cache");
  }
  AttnDims d{q.shape[0], q.shape[1], k_cache.shape[1], q.shape[2], k_cache.shape[0], k_cache.shape[2], 0, 0};
  MSA_REQUIRE(c, d.Hq >= 1, "q", "needs at least one head");
  MSA_REQUIRE(c, d.Hkv >= 1, "k_cache", "needs at least one KV head");
  MSA_REQUIRE(c, d.D >= 1, "q", "head dim D must be >= 1");
  MSA_REQUIRE(c, d.Bs >= 1, "k_cache", "block size Bs (dim 2) must be >= 1");
  MSA_REQUIRE(
      c, d.Hq % d.Hkv == 0, "q",
      "Hq = " + std::to_string(d.Hq) + " is not a multiple of Hkv = " + std::to_string(d.Hkv) + " (Hq % Hkv != 0)");
  c.dim(k_cache, "k_cache", 3, d.D, "D (head dim of q)");
  const BatchDims b = check_paged_batch(c, batch, d.Bs);
  d.B = b.B;
  d.max_blocks = b.max_blocks;
  return d;
}

BatchDims check_paged_batch(const Checker& c, const PagedBatch& batch, int64_t Bs) {
  const auto& [block_table, kv_len, cu_q] = batch;
  c.tensor(kv_len, "kv_len", 1, {DType::i32});
  const int64_t B = kv_len.shape[0];
  c.tensor(cu_q, "cu_q", 1, {DType::i32});
  c.dim(cu_q, "cu_q", 0, B + 1, "B+1");
  c.tensor(block_table, "block_table", 2, {DType::i32});
  c.dim(block_table, "block_table", 0, B, "B");
  const int64_t max_blocks = block_table.shape[1];
  MSA_REQUIRE(c, max_blocks * Bs <= INT32_MAX, "block_table", "max_blocks * Bs exceeds the int32 position range");
  return {B, max_blocks};
}

void check_out_lse(const Checker& c, const Tensor& q, const Tensor& out, const Tensor& lse) {
  c.tensor(out, "out", 3);
  c.same_shape(out, "out", q, "q");
  c.tensor(lse, "lse", 2, {DType::f32});
  c.dim(lse, "lse", 0, q.shape[0], "T");
  c.dim(lse, "lse", 1, q.shape[1], "Hq");
}

void check_f32_like(const Checker& c, const Tensor& t, const char* arg, const Tensor& like, const char* like_arg) {
  c.tensor(t, arg, like.rank, {DType::f32});
  for (int i = 0; i < like.rank; ++i)
    c.dim(t, arg, i, like.shape[i], std::string("dim ") + std::to_string(i) + " of " + like_arg);
}

float resolve_scale(const Checker& c, float scale, int64_t dim) {
  c.finite(scale, "scale");
  return scale == 0.0f ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim))) : scale;
}

void check_mode(const Checker& c, SelectionMode mode) {
  MSA_REQUIRE(c, mode == SelectionMode::per_kv_head || mode == SelectionMode::shared, "mode",
              "must be per_kv_head or shared");
}

void check_block_idx(const Checker& c, const Tensor& block_idx, int64_t NQ, SelectionMode mode, int64_t Hkv) {
  c.tensor(block_idx, "block_idx", 3, {DType::i32});
  c.dim(block_idx, "block_idx", 0, NQ, "NQ");
  const bool shared = mode == SelectionMode::shared;
  c.dim(block_idx, "block_idx", 1, shared ? 1 : Hkv, shared ? "1 (shared mode)" : "Hkv (per_kv_head mode)");
  MSA_REQUIRE(c, block_idx.shape[2] >= 1, "block_idx", "needs k >= 1 entries per row");
}

void check_patch_qkv(const Checker& c, const Tensor& q, const Tensor& k, const Tensor& v) {
  c.tensor(q, "q", 3, kActDtypes);
  c.tensor(k, "k", 3);
  c.same_shape(k, "k", q, "q");
  c.tensor(v, "v", 3);
  c.same_shape(v, "v", q, "q");
}

void check_items(const Checker& c, const Tensor& items, int64_t N) {
  c.tensor(items, "items", 2, {DType::i32});
  c.dim(items, "items", 1, 3, "3 ({grid_t, grid_h, grid_w})");
  if (!c.device().host_accessible()) return;
  std::vector<int32_t> it(static_cast<size_t>(items.numel()));
  if (!it.empty()) c.device().stream().download(it.data(), items);
  int64_t total = 0;
  for (size_t i = 0; i + 2 < it.size(); i += 3) {
    MSA_REQUIRE(c, it[i] >= 1 && it[i + 1] >= 1 && it[i + 2] >= 1, "items",
                "item " + std::to_string(i / 3) + " has a grid dimension < 1");
    const int64_t hw = int64_t{it[i + 1]} * it[i + 2];  // < 2^62; the product of all three could overflow
    MSA_REQUIRE(c, it[i] <= (N - total) / hw, "items",
                "items cover more than the N = " + std::to_string(N) + " patches of q");
    total += it[i] * hw;
  }
  MSA_REQUIRE(c, total == N, "items",
              "items cover " + std::to_string(total) + " patches but q has N = " + std::to_string(N));
}

}  // namespace msa::ops::detail
