// kv_append of cpu-ref: the expected caches are built by walking every page slot of every
// sequence and asking which packed token (if any) belongs there; everything else must keep
// its old bytes. Indexer keys are converted to the cache dtype (fp8: per-token scale).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hal/nvfp4.h"
#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::cpu_ref_test {
namespace {

// For every (page, slot) of the layout, the packed token written there, or -1.
std::vector<int64_t> slot_owner(const Layout& L) {
  std::vector<int64_t> owner(static_cast<size_t>(L.P) * L.Bs, -1);
  for (int b = 0; b < L.B; ++b)
    for (int c = 0; c < L.n_blocks(b); ++c)
      for (int slot = 0; slot < L.Bs; ++slot) {
        const int64_t pos = int64_t{c} * L.Bs + slot, first_new = L.kv_len[b] - L.q_len[b];
        if (pos >= first_new && pos < L.kv_len[b])
          owner[static_cast<size_t>(L.page(b, c)) * L.Bs + slot] = L.cu_q[b] + (pos - first_new);
      }
  return owner;
}

struct KiSetup {
  DType ki_dtype;   // of ki (the new keys)
  DType cache;      // of ki_cache
  bool with_scale;  // fp8 only
};

TEST(CpuRefKvAppend, WritesExactlyTheNewSlots) {
  const int Hkv = 2, D = 6, Di = 8;
  for (DType t : kActDTypes)
    for (KiSetup ks : {KiSetup{DType::f32, DType::bf16, false}, KiSetup{DType::bf16, DType::f32, false},
                       KiSetup{DType::f32, DType::fp8_e4m3, true}, KiSetup{DType::f16, DType::fp8_e4m3, false}}) {
      const Layout L = make_layout({3, 0, 1, 5, 4}, {3, 7, 20, 13, 8}, 4, 11);
      Ref ref;
      // Old cache content: random everywhere (the slots to be written included).
      const size_t cache_n = static_cast<size_t>(L.P) * Hkv * L.Bs * D;
      const auto k_old = random_values(cache_n, t, 1), v_old = random_values(cache_n, t, 2);
      const auto ki_old = random_values(static_cast<size_t>(L.P) * L.Bs * Di, ks.cache, 3);
      const auto s_old = random_values(static_cast<size_t>(L.P) * L.Bs, DType::f32, 4, 1.f, 2.f);
      auto k_new = random_values(static_cast<size_t>(L.T) * Hkv * D, t, 5);
      auto v_new = random_values(static_cast<size_t>(L.T) * Hkv * D, t, 6);
      auto ki_new = random_values(static_cast<size_t>(L.T) * Di, ks.ki_dtype, 7, -600.f, 600.f);
      for (int d = 0; d < Di; ++d) ki_new[d] = 0.0f;  // token 0: an all-zero row (scale 1)

      ops::KvAppendArgs a;
      a.k = ref.make(t, {L.T, Hkv, D}, k_new);
      a.v = ref.make(t, {L.T, Hkv, D}, v_new);
      a.ki = ref.make(ks.ki_dtype, {L.T, Di}, ki_new);
      a.block_table = ref.make_i32({L.B, L.max_blocks}, L.block_table);
      a.kv_len = ref.make_i32({L.B}, L.kv_len);
      a.cu_q = ref.make_i32({L.B + 1}, L.cu_q);
      a.k_cache = ref.make(t, {L.P, Hkv, L.Bs, D}, k_old);
      a.v_cache = ref.make(t, {L.P, Hkv, L.Bs, D}, v_old);
      a.ki_cache = ref.make(ks.cache, {L.P, L.Bs, Di}, ki_old);
      if (ks.with_scale) a.ki_scale = ref.make(DType::f32, {L.P, L.Bs}, s_old);
      ops::kv_append(ref.device(), a);

      std::vector<float> k_want = k_old, v_want = v_old, ki_want = ki_old, s_want = s_old;
      const std::vector<int64_t> owner = slot_owner(L);
      for (int p = 0; p < L.P; ++p)
        for (int slot = 0; slot < L.Bs; ++slot) {
          const int64_t tok = owner[static_cast<size_t>(p) * L.Bs + slot];
          if (tok < 0) continue;
          for (int h = 0; h < Hkv; ++h)
            for (int d = 0; d < D; ++d) {
              k_want[((static_cast<size_t>(p) * Hkv + h) * L.Bs + slot) * D + d] = k_new[(tok * Hkv + h) * D + d];
              v_want[((static_cast<size_t>(p) * Hkv + h) * L.Bs + slot) * D + d] = v_new[(tok * Hkv + h) * D + d];
            }
          float amax = 0;
          for (int d = 0; d < Di; ++d) amax = std::max(amax, std::fabs(ki_new[tok * Di + d]));
          const float scale = ks.with_scale && amax > 0 ? amax / 448.0f : 1.0f;
          if (ks.with_scale) s_want[static_cast<size_t>(p) * L.Bs + slot] = scale;
          for (int d = 0; d < Di; ++d) {
            const float x = ki_new[tok * Di + d];
            const float stored = hal::round_to(ks.cache, x / scale);
            ki_want[(static_cast<size_t>(p) * L.Bs + slot) * Di + d] = stored;
            if (ks.cache == DType::fp8_e4m3 && ks.with_scale)  // dequantises to within e4m3 precision
              EXPECT_NEAR(stored * scale, x, std::fabs(x) / 16 + scale / 512);
            if (ks.cache == DType::fp8_e4m3 && !ks.with_scale)  // saturates at +-448
              EXPECT_LE(std::fabs(stored), 448.0f);
          }
        }
      const std::string what = std::string(hal::dtype_name(t)) + " ki " + hal::dtype_name(ks.cache);
      EXPECT_EQ(ref.get(a.k_cache), k_want) << what;
      EXPECT_EQ(ref.get(a.v_cache), v_want) << what;
      EXPECT_EQ(ref.get(a.ki_cache), ki_want) << what;
      if (ks.with_scale) EXPECT_EQ(ref.get(a.ki_scale), s_want) << what;
    }
}

// NVFP4 keys: each written slot holds hal::quantize_nvfp4_group of its key's groups (codes
// and scale), which decode to within half a code step of the key; every other byte of
// the code and scale caches is kept.
TEST(CpuRefKvAppend, Nvfp4KeysQuantizedPerGroup) {
  const int Hkv = 1, D = 4, Di = 32, G = Di / 16;
  const Layout L = make_layout({3, 0, 1, 5, 4}, {3, 7, 20, 13, 8}, 4, 12);
  Ref ref;
  const size_t cache_n = static_cast<size_t>(L.P) * Hkv * L.Bs * D;
  const auto k_old = random_values(cache_n, DType::f32, 1);
  std::vector<float> codes_old(static_cast<size_t>(L.P) * L.Bs * Di / 2),
      scales_old(static_cast<size_t>(L.P) * L.Bs * G);
  for (size_t i = 0; i < codes_old.size(); ++i) codes_old[i] = static_cast<float>((i * 37 + 11) % 256);
  for (size_t i = 0; i < scales_old.size(); ++i) scales_old[i] = 0.125f * static_cast<float>(1 + i % 7);
  auto ki_new = random_values(static_cast<size_t>(L.T) * Di, DType::bf16, 7, -20.f, 20.f);
  for (int d = 0; d < 16; ++d) ki_new[d] = 0.0f;  // token 0, group 0: all zero -> scale 0
  ki_new[Di + 3] = kNaN;                          // token 1: a NaN element becomes +0

  ops::KvAppendArgs a;
  a.k = ref.make(DType::f32, {L.T, Hkv, D}, random_values(static_cast<size_t>(L.T) * Hkv * D, DType::f32, 5));
  a.v = a.k;
  a.ki = ref.make(DType::bf16, {L.T, Di}, ki_new);
  a.block_table = ref.make_i32({L.B, L.max_blocks}, L.block_table);
  a.kv_len = ref.make_i32({L.B}, L.kv_len);
  a.cu_q = ref.make_i32({L.B + 1}, L.cu_q);
  a.k_cache = ref.make(DType::f32, {L.P, Hkv, L.Bs, D}, k_old);
  a.v_cache = ref.make(DType::f32, {L.P, Hkv, L.Bs, D}, k_old);
  a.ki_cache = ref.make(DType::fp4_e2m1x2, {L.P, L.Bs, Di / 2}, codes_old);
  a.ki_scale = ref.make(DType::fp8_e4m3, {L.P, L.Bs, G}, scales_old);
  ops::kv_append(ref.device(), a);
  const auto codes = ref.get(a.ki_cache), scales = ref.get(a.ki_scale);

  std::vector<float> codes_want = codes_old, scales_want = scales_old;
  const std::vector<int64_t> owner = slot_owner(L);
  int written = 0;
  for (int64_t row = 0; row < static_cast<int64_t>(owner.size()); ++row) {
    const int64_t tok = owner[static_cast<size_t>(row)];
    if (tok < 0) continue;
    ++written;
    for (int g = 0; g < G; ++g) {
      uint8_t packed[8], sb = 0;
      hal::quantize_nvfp4_group(ki_new.data() + tok * Di + g * 16, packed, &sb);
      scales_want[static_cast<size_t>(row * G + g)] = hal::fp8_e4m3_to_f32(sb);
      for (int i = 0; i < 8; ++i) codes_want[static_cast<size_t>(row * Di / 2 + g * 8 + i)] = packed[i];
      // Decodes to within half a code step (at most 1 x scale between codes 4 and 6).
      const float sc = hal::fp8_e4m3_to_f32(sb);
      for (int i = 0; i < 16; ++i) {
        const float x = ki_new[tok * Di + g * 16 + i];
        const float got = hal::e2m1_element(packed, static_cast<size_t>(i)) * sc;
        if (std::isnan(x))
          EXPECT_EQ(got, 0.0f);
        else
          EXPECT_LE(std::fabs(got - x), sc * 1.0f + 1e-6f) << "token " << tok << " dim " << g * 16 + i;
      }
    }
  }
  EXPECT_GT(written, 0);
  EXPECT_EQ(codes, codes_want);
  EXPECT_EQ(scales, scales_want);
}

TEST(CpuRefKvAppend, WithoutIndexerKeysAndThenAttend) {
  // Append a decode step, then dense attention over the cache sees the new token.
  const Layout L = make_layout({1}, {6}, 4, 2);
  Ref ref;
  const int D = 4;
  std::vector<float> k_old(static_cast<size_t>(L.P) * L.Bs * D, kNaN), v_old = k_old;
  // Tokens 0..4 hold k = 0 (uniform attention) and v = 0; token 5 arrives now.
  for (int s = 0; s < 5; ++s)
    for (int d = 0; d < D; ++d) {
      k_old[(static_cast<size_t>(L.page(0, s / 4)) * L.Bs + s % 4) * D + d] = 0;
      v_old[(static_cast<size_t>(L.page(0, s / 4)) * L.Bs + s % 4) * D + d] = 0;
    }
  ops::KvAppendArgs a;
  a.k = ref.make(DType::f32, {1, 1, D}, {0, 0, 0, 0});
  a.v = ref.make(DType::f32, {1, 1, D}, {6, 12, 18, 24});
  a.block_table = ref.make_i32({L.B, L.max_blocks}, L.block_table);
  a.kv_len = ref.make_i32({1}, L.kv_len);
  a.cu_q = ref.make_i32({2}, L.cu_q);
  a.k_cache = ref.make(DType::f32, {L.P, 1, L.Bs, D}, k_old);
  a.v_cache = ref.make(DType::f32, {L.P, 1, L.Bs, D}, v_old);
  ops::kv_append(ref.device(), a);

  ops::DenseAttentionArgs d;
  d.q = ref.make(DType::f32, {1, 1, D}, {1, 1, 1, 1});
  d.k_cache = a.k_cache, d.v_cache = a.v_cache, d.block_table = a.block_table;
  d.kv_len = a.kv_len, d.cu_q = a.cu_q;
  d.out = ref.out(DType::f32, {1, 1, D});
  d.lse = ref.out(DType::f32, {1, 1});
  ops::dense_attention(ref.device(), d);
  const auto out = ref.get(d.out);
  for (int i = 0; i < D; ++i) EXPECT_FLOAT_EQ(out[i], (i + 1) * 6.0f / 6.0f);  // mean of 6 rows
  EXPECT_NEAR(ref.get(d.lse)[0], std::log(6.0), 1e-6);
}

}  // namespace
}  // namespace msa::cpu_ref_test
