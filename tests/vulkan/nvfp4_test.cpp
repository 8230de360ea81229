// NVFP4 indexer keys (fp4_e2m1x2 ki_cache + [P][Bs][Di/16] e4m3 ki_scale) on Vulkan,
// against cpu-ref, on the paths the case sets do not reach by themselves:
// - indexer_score: indexer_score.block.comp (aligned view, a view at an 8-byte offset, the keys
//   forced onto their device address) and indexer_score.comp (a view at an odd byte
//   offset, Bs = 256, Di = 256); slack slots hold NaN scales (never in a score); a NaN
//   scale of a valid slot leaves every other block's score exact (its own block's score is
//   not compared: cpu-ref's pooling keeps the NaN logit, the Vulkan pooling, shared with
//   NaN fp8 keys, drops it);
// - kv_append: edge values (NaN, +-inf, -0, f32 subnormals, saturation, every rounding
//   boundary of the code rule and its neighbours, e4m3 subnormal scales, scale rounding
//   ties) written bit-exactly, into views at word-aligned and odd byte offsets, without
//   touching the neighbouring bytes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "hal/dtype.h"
#include "hal/nvfp4.h"
#include "ops/ops.h"
#include "tests/vulkan/vk_test_util.h"
#if MSA_TEST_VULKAN_INTERNALS
#include "backends/vulkan/device.h"
#include "backends/vulkan/stream.h"
#endif

namespace msa::vulkan_test {
namespace {

struct IndexerShape {
  int64_t Hi = 4, Di = 128, Bs = 64;
  std::vector<int32_t> q_len{1, 1, 3}, kv_len{1000, 70, 300};
  size_t key_offset = 0;    // byte offset of the ki_cache view in its buffer
  size_t scale_offset = 0;  // byte offset of the ki_scale view
  bool nan_in_valid_slot = false;
};

// block_score of indexer_score on `d` with NVFP4 keys (max pooling; lse when `lse`).
std::vector<float> nvfp4_scores(hal::Device& d, const IndexerShape& x, bool lse) {
  const int64_t B = static_cast<int64_t>(x.kv_len.size()), G = x.Di / 16;
  int64_t MB = 0, T = 0;
  for (int64_t b = 0; b < B; ++b) {
    MB = std::max<int64_t>(MB, (x.kv_len[b] + x.Bs - 1) / x.Bs);
    T += x.q_len[b];
  }
  const int64_t P = B * MB;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-4.0f, 2.0f);
  hal::HostTensor qi(DType::bf16, {T, x.Hi, x.Di}), bt(DType::i32, {B, MB}), kvl(DType::i32, {B}),
      cuq(DType::i32, {B + 1});
  for (int64_t i = 0; i < qi.numel(); ++i) qi.set(i, u(rng));
  cuq.data<int32_t>()[0] = 0;
  for (int64_t b = 0; b < B; ++b) {
    kvl.data<int32_t>()[b] = x.kv_len[b];
    cuq.data<int32_t>()[b + 1] = cuq.data<int32_t>()[b] + x.q_len[b];
    for (int64_t c = 0; c < MB; ++c) bt.data<int32_t>()[b * MB + c] = static_cast<int32_t>(P - 1 - (b * MB + c));
  }
  std::vector<uint8_t> codes(static_cast<size_t>(P * x.Bs * x.Di / 2)), scales(static_cast<size_t>(P * x.Bs * G));
  for (auto& c : codes) c = static_cast<uint8_t>(rng() & 0xff);
  for (auto& s : scales) s = hal::f32_to_fp8_e4m3(std::exp2(e(rng)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < MB; ++c) {
      const int64_t page = P - 1 - (b * MB + c);
      for (int64_t r = 0; r < x.Bs; ++r)
        if (c * x.Bs + r >= x.kv_len[b])  // slack: NaN scales
          for (int64_t g = 0; g < G; ++g) scales[static_cast<size_t>((page * x.Bs + r) * G + g)] = 0x7f;
    }
  if (x.nan_in_valid_slot) {  // sequence 0, token 5 (block 0), group 1
    const int64_t page = P - 1;
    scales[static_cast<size_t>((page * x.Bs + 5) * G + 1)] = 0xff;
  }
  auto kbuf = d.alloc(x.key_offset + codes.size() + 16), sbuf = d.alloc(x.scale_offset + scales.size() + 16);
  ops::IndexerScoreArgs a;
  a.ki_cache = hal::Tensor(kbuf.get(), DType::fp4_e2m1x2, {P, x.Bs, x.Di / 2}, x.key_offset);
  a.ki_scale = hal::Tensor(sbuf.get(), DType::fp8_e4m3, {P, x.Bs, G}, x.scale_offset);
  d.stream().upload(a.ki_cache, codes.data());
  d.stream().upload(a.ki_scale, scales.data());
  auto tq = hal::to_device(d, qi), tb = hal::to_device(d, bt), tl = hal::to_device(d, kvl), tc = hal::to_device(d, cuq);
  auto out = d.alloc_tensor(DType::f32, {T, x.Hi, MB});
  a.qi = tq.tensor, a.block_table = tb.tensor, a.kv_len = tl.tensor, a.cu_q = tc.tensor, a.Qb = 1, a.NQ = T;
  a.block_score = out.tensor;
  a.pool = lse ? ops::Pool::lse : ops::Pool::max;
  ops::indexer_score(d, a);
  d.stream().synchronize();
  return hal::to_host(d, out.tensor).to_f32();
}

void expect_scores(const std::vector<float>& got, const std::vector<float>& want, bool expect_nan) {
  ASSERT_EQ(got.size(), want.size());
  size_t nans = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      ++nans;  // a block with a NaN logit: pooled differently (see the top of the file)
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "score " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "score " << i;
    }
  }
  EXPECT_EQ(nans > 0, expect_nan);
}

class Nvfp4 : public VulkanTest {
 protected:
  void check_scores(const IndexerShape& x) {
    auto ref = hal::create_device("cpu-ref");
    for (bool lse : {false, true}) {
      SCOPED_TRACE(lse ? "lse" : "max");
      expect_scores(nvfp4_scores(dev(), x, lse), nvfp4_scores(*ref, x, lse), x.nan_in_valid_slot);
    }
  }
};

TEST_F(Nvfp4, IndexerBlockPathMatchesReference) {
  IndexerShape x;
  check_scores(x);
  x.Di = 64;
  x.key_offset = 8;  // off_ki in 8-byte units, not 0
  x.scale_offset = 5;
  check_scores(x);
  x.Di = 16;  // one group: rows of 8 bytes
  check_scores(x);
}

TEST_F(Nvfp4, IndexerBlockPathByAddressMatchesReference) {
#if MSA_TEST_VULKAN_INTERNALS
  if (!static_cast<vulkan::VulkanDevice&>(dev()).caps().buffer_address)
    GTEST_SKIP() << "device without buffer device addresses";
  auto& stream = static_cast<vulkan::VulkanStream&>(dev().stream());
  const uint64_t before = stream.address_binds();
#endif
  ScopedTuning force(dev(), "force_bda", "1");
  IndexerShape x;
  check_scores(x);
  x.Di = 48;
  x.key_offset = 24;
  check_scores(x);
#if MSA_TEST_VULKAN_INTERNALS
  EXPECT_EQ(stream.address_binds(), before + 4) << "force_bda=1 did not take the keys by address";
#endif
}

TEST_F(Nvfp4, IndexerGenericPathMatchesReference) {
  IndexerShape x;
  x.key_offset = 3;  // not a multiple of 8: indexer_score.comp
  x.scale_offset = 1;
  check_scores(x);
  x.key_offset = 0;
  x.Bs = 256;  // Bs > 128: indexer_score.comp
  x.Di = 80;
  check_scores(x);
  x.Di = 256;  // Di > 128
  x.Bs = 32;
  check_scores(x);
}

TEST_F(Nvfp4, NanScaleOfAValidSlotLeavesOtherBlocksExact) {
  IndexerShape x;
  x.nan_in_valid_slot = true;
  check_scores(x);
  x.key_offset = 1;  // generic path
  check_scores(x);
}

// Groups of 16 f32 values exercising quantize_nvfp4_group's rule.
std::vector<float> edge_groups(std::mt19937& rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> gs;
  gs.push_back(std::vector<float>(16, 0.0f));
  gs.push_back(std::vector<float>(16, -0.0f));
  gs.push_back(std::vector<float>(16, nan));
  gs.push_back({nan, -0.0f, 1.0f, -1.0f, inf, -inf, 3.0f, nan, 0.5f, -0.5f, 2.0f, 7.0f, 1e-30f, -1e-40f, 0.0f, 6.0f});
  gs.push_back({1e-40f, -1e-42f, 1e-45f, 0.0f, 1e-39f, 3e-39f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1e-38f});  // f32 subnormals
  gs.push_back({1e6f, -3e5f, 2700.0f, 2688.0f, 448.0f * 6.0f, -1.0f, 0.1f, 0, 0, 0, 0, 0, 0, 0, 0, 0});  // saturation
  // For e4m3 scales s (normal and subnormal): amax = 6 s (scale byte s), then every code
  // boundary s * {0.25, ..., 5} of both signs and its f32 neighbours.
  const float bounds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  for (int sb = 1; sb < 0x7f; sb += 3) {
    const float s = hal::fp8_e4m3_to_f32(static_cast<uint8_t>(sb));
    for (int dir = -1; dir <= 1; ++dir) {
      std::vector<float> g{6.0f * s, -6.0f * s};
      for (float k : bounds) {
        float v = k * s;
        if (dir < 0) v = std::nextafter(v, 0.0f);
        if (dir > 0) v = std::nextafter(v, inf);
        g.push_back(v);
        g.push_back(-v);
      }
      gs.push_back(g);
    }
  }
  // Scale rounding: amax just around 6 x (midpoints of adjacent e4m3 values), so that
  // amax * f32(1/6) lands on and around the RNE ties (normal and subnormal scales).
  for (int sb = 0; sb < 0x7e; ++sb) {
    const float lo = hal::fp8_e4m3_to_f32(static_cast<uint8_t>(sb)),
                hi = hal::fp8_e4m3_to_f32(static_cast<uint8_t>(sb + 1));
    const float mid = 0.5f * (lo + hi);
    std::vector<float> g;
    for (float a : {6.0f * mid, mid / 0.16666667f, mid * 6.0000005f}) {
      g.push_back(a);
      g.push_back(std::nextafter(a, 0.0f));
      g.push_back(std::nextafter(a, inf));
    }
    // each group's amax is its largest entry: use one candidate per group
    for (size_t i = 0; i < g.size(); ++i) {
      std::vector<float> one(16, 0.0f);
      one[0] = g[i];
      for (int j = 1; j < 16; ++j) one[j] = g[i] * (static_cast<float>(j) / 17.0f) * ((j & 1) ? -1.0f : 1.0f);
      gs.push_back(one);
    }
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-40, 20);
  for (int i = 0; i < 200; ++i) {
    const float m = std::ldexp(1.0f, ex(rng));
    std::vector<float> g(16);
    for (float& v : g) v = nd(rng) * m;
    gs.push_back(g);
  }
  std::vector<float> flat;
  for (const auto& g : gs) flat.insert(flat.end(), g.begin(), g.end());
  return flat;
}

struct AppendResult {
  std::vector<uint8_t> codes, scales;  // whole buffers (neighbours of the views included)
};

// kv_append of T tokens (ki in `kt`, Di dims, groups from `vals` row-major) into views at
// the given byte offsets of buffers pre-filled with 0xA5.
AppendResult append_nvfp4(hal::Device& d, DType kt, int64_t Di, const std::vector<float>& vals, size_t code_off,
                          size_t scale_off) {
  const int64_t T = static_cast<int64_t>(vals.size()) / Di, G = Di / 16, Bs = 16, Hkv = 1, D = 4;
  // Sequences of up to 40 new tokens (the first with 9 cached tokens before them).
  std::vector<int32_t> ql, kl;
  for (int64_t t = 0; t < T; t += 40) ql.push_back(static_cast<int32_t>(std::min<int64_t>(40, T - t)));
  const int64_t B = static_cast<int64_t>(ql.size());
  int64_t MB = 0;
  for (int64_t b = 0; b < B; ++b) {
    kl.push_back(ql[b] + (b == 0 ? 9 : 0));
    MB = std::max<int64_t>(MB, (kl[b] + Bs - 1) / Bs);
  }
  const int64_t P = B * MB + 1;
  hal::HostTensor ki(kt, {T, Di}), k(DType::bf16, {T, Hkv, D}), bt(DType::i32, {B, MB}), kvl(DType::i32, {B}),
      cuq(DType::i32, {B + 1});
  for (int64_t i = 0; i < ki.numel(); ++i) ki.set(static_cast<size_t>(i), vals[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < k.numel(); ++i) k.set(i, 0.25f * static_cast<float>(i % 7));
  cuq.data<int32_t>()[0] = 0;
  for (int64_t b = 0; b < B; ++b) {
    kvl.data<int32_t>()[b] = kl[b];
    cuq.data<int32_t>()[b + 1] = cuq.data<int32_t>()[b] + ql[b];
    for (int64_t c = 0; c < MB; ++c) bt.data<int32_t>()[b * MB + c] = static_cast<int32_t>(P - 1 - (b * MB + c));
  }
  const size_t code_bytes = static_cast<size_t>(P * Bs * Di / 2), scale_bytes = static_cast<size_t>(P * Bs * G);
  const size_t cb_size = (code_off + code_bytes + 8 + 15) / 16 * 16,
               sb_size = (scale_off + scale_bytes + 8 + 15) / 16 * 16;
  auto cbuf = d.alloc(cb_size), sbuf = d.alloc(sb_size);
  const hal::Tensor cwhole(cbuf.get(), DType::fp8_e4m3, {static_cast<int64_t>(cb_size)}),
      swhole(sbuf.get(), DType::fp8_e4m3, {static_cast<int64_t>(sb_size)});
  d.stream().fill_bytes(cwhole, 0xA5);
  d.stream().fill_bytes(swhole, 0xA5);
  auto tki = hal::to_device(d, ki), tk = hal::to_device(d, k), tv = hal::to_device(d, k), tb = hal::to_device(d, bt),
       tl = hal::to_device(d, kvl), tc = hal::to_device(d, cuq);
  auto kc = d.alloc_tensor(DType::bf16, {P, Hkv, Bs, D}), vc = d.alloc_tensor(DType::bf16, {P, Hkv, Bs, D});
  ops::KvAppendArgs a;
  a.k = tk.tensor, a.v = tv.tensor, a.ki = tki.tensor, a.block_table = tb.tensor, a.kv_len = tl.tensor;
  a.cu_q = tc.tensor, a.k_cache = kc.tensor, a.v_cache = vc.tensor;
  a.ki_cache = hal::Tensor(cbuf.get(), DType::fp4_e2m1x2, {P, Bs, Di / 2}, code_off);
  a.ki_scale = hal::Tensor(sbuf.get(), DType::fp8_e4m3, {P, Bs, G}, scale_off);
  ops::kv_append(d, a);
  d.stream().synchronize();
  return {hal::to_host(d, cwhole).bytes, hal::to_host(d, swhole).bytes};
}

void expect_same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && ++bad <= 10)
      ADD_FAILURE() << what << " byte " << i << ": 0x" << std::hex << int(got[i]) << ", want 0x" << int(want[i]);
  EXPECT_EQ(bad, 0u) << what;
}

TEST_F(Nvfp4, KvAppendEdgeValuesBitExact) {
  std::mt19937 rng(21);
  const std::vector<float> groups = edge_groups(rng);
  auto ref = hal::create_device("cpu-ref");
  for (int64_t Di : {16, 48, 64}) {
    std::vector<float> vals = groups;
    while (vals.size() % static_cast<size_t>(Di) != 0) vals.push_back(0.5f);
    for (DType kt : {DType::f32, DType::bf16, DType::f16}) {
      for (auto [co, so] : {std::pair<size_t, size_t>{0, 0}, {1, 3}, {6, 2}, {8, 1}}) {
        SCOPED_TRACE("Di " + std::to_string(Di) + " ki " + hal::dtype_name(kt) + " offsets " + std::to_string(co) +
                     "/" + std::to_string(so));
        const AppendResult want = append_nvfp4(*ref, kt, Di, vals, co, so);
        const AppendResult got = append_nvfp4(dev(), kt, Di, vals, co, so);
        ASSERT_NE(std::count(want.codes.begin(), want.codes.end(), uint8_t{0xA5}),
                  static_cast<long>(want.codes.size()));
        expect_same_bytes(got.codes, want.codes, "ki_cache");
        expect_same_bytes(got.scales, want.scales, "ki_scale");
      }
    }
  }
}

}  // namespace
}  // namespace msa::vulkan_test
