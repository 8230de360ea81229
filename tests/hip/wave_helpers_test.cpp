// The device helpers of backends/cuda/common.cuh (the ones every portable kernel uses),
// run in the CPU emulation and checked against plain loops. This file is compiled twice,
// with MSA_EMU_WARP = 32 (as NVIDIA) and 64 (as AMD CDNA), into namespaces emu32/emu64:
// a helper that assumes 32 lanes anywhere fails the wave-64 build. The last tests show
// that the checks do catch such a helper.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/common.cuh"
#include "hal/dtype.h"

#define MSA_CAT2(a, b) a##b
#define MSA_CAT(a, b) MSA_CAT2(a, b)
#define WAVE_SUITE MSA_CAT(Wave, MSA_EMU_WARP)

namespace msa::MSA_GPU_NS {
namespace {

int tid() { return static_cast<int>(threadIdx.x); }

template <typename F>
void run(int threads, F body) {
  ::msa_emu::launch(kWarp, ::msa_emu::LaunchCfg(dim3(1), dim3(static_cast<unsigned>(threads))), body);
}

// Small integers as floats: every order of summation is exact, so results compare exactly.
std::vector<float> ints(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<int>(rng() % 201) - 100);
  return v;
}

// Mismatches of a width-W segment reduction: every lane must hold op over its segment.
template <int W, typename Reduce, typename Op>
int segment_mismatches(int threads, Reduce reduce, Op op, float init) {
  const std::vector<float> in = ints(threads, 7u + W);
  std::vector<float> out(threads);
  run(threads, [&] { out[tid()] = reduce(in[tid()]); });
  int bad = 0;
  for (int t = 0; t < threads; ++t) {
    const int s0 = t - t % W;
    float want = init;
    for (int i = s0; i < s0 + W; ++i) want = op(want, in[i]);
    bad += out[t] != want;
  }
  return bad;
}

float add(float a, float b) { return a + b; }
float mx(float a, float b) { return std::max(a, b); }

TEST(WAVE_SUITE, WarpSumEveryWidth) {
  const int n = 4 * kWarp;
  EXPECT_EQ(0, segment_mismatches<kWarp>(
                   n, [](float v) { return warp_sum(v); }, add, 0.0f));
  EXPECT_EQ(0, segment_mismatches<kWarp>(
                   n, [](float v) { return warp_sum<kWarp>(v); }, add, 0.0f));
  EXPECT_EQ(0, segment_mismatches<16>(
                   n, [](float v) { return warp_sum<16>(v); }, add, 0.0f));
  EXPECT_EQ(0, segment_mismatches<4>(
                   n, [](float v) { return warp_sum<4>(v); }, add, 0.0f));
}

TEST(WAVE_SUITE, WarpMaxEveryWidth) {
  const int n = 4 * kWarp;
  const float lo = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(0, segment_mismatches<kWarp>(
                   n, [](float v) { return warp_max(v); }, mx, lo));
  EXPECT_EQ(0, segment_mismatches<8>(
                   n, [](float v) { return warp_max<8>(v); }, mx, lo));
}

TEST(WAVE_SUITE, WarpSumInt) {
  const int n = 2 * kWarp;
  std::vector<int> out(n);
  run(n, [&] { out[tid()] = warp_sum_int(tid()); });
  for (int t = 0; t < n; ++t) {
    const int s0 = t - t % kWarp;
    EXPECT_EQ(out[t], kWarp * s0 + kWarp * (kWarp - 1) / 2) << t;
  }
}

template <int W>
void check_incl_scan() {
  const int n = 2 * kWarp;
  std::vector<int> in(n), out(n);
  for (int t = 0; t < n; ++t) in[t] = (t * 37) % 11 - 3;
  run(n, [&] { out[tid()] = warp_incl_scan<W>(in[tid()], tid() % W); });
  for (int t = 0; t < n; ++t) {
    int want = 0;
    for (int i = t - t % W; i <= t; ++i) want += in[i];
    ASSERT_EQ(out[t], want) << "width " << W << " thread " << t;
  }
}

TEST(WAVE_SUITE, WarpInclusiveScanEveryWidth) {
  check_incl_scan<kWarp>();
  check_incl_scan<32>();
  check_incl_scan<8>();
}

// Block sizes the kernels use (multiples of the wave; the helpers need whole waves).
const int kBlocks[] = {kWarp, 128, 256, 512, 1024};

TEST(WAVE_SUITE, BlockSumAndMax) {
  for (int threads : kBlocks) {
    const std::vector<float> in = ints(threads, 3u + threads);
    std::vector<float> s(threads), m(threads);
    run(threads, [&] {
      static float scratch[1024 / kWarp];
      s[tid()] = block_sum(in[tid()], scratch);
      m[tid()] = block_max(in[tid()], scratch);
    });
    float want_s = 0, want_m = -std::numeric_limits<float>::infinity();
    for (float x : in) {
      want_s += x;
      want_m = std::max(want_m, x);
    }
    for (int t = 0; t < threads; ++t) {
      ASSERT_EQ(s[t], want_s) << threads << " threads, thread " << t;
      ASSERT_EQ(m[t], want_m) << threads << " threads, thread " << t;
    }
  }
}

TEST(WAVE_SUITE, BlockExclusiveScan) {
  for (int threads : kBlocks) {
    std::vector<int> in(threads), out(threads), total(threads);
    for (int t = 0; t < threads; ++t) in[t] = (t * 13) % 5;
    run(threads, [&] {
      static int scratch[1024 / kWarp + 1];
      int tot = 0;
      out[tid()] = block_excl_scan(in[tid()], scratch, &tot);
      total[tid()] = tot;
    });
    int acc = 0;
    for (int t = 0; t < threads; ++t) {
      ASSERT_EQ(out[t], acc) << threads << " threads, thread " << t;
      acc += in[t];
    }
    for (int t = 0; t < threads; ++t) ASSERT_EQ(total[t], acc);
  }
}

// The helpers' precondition made visible: a block that ends in a partial wave reads lanes
// that do not exist (poison here, garbage on hardware). At wave 64, 96 threads is such a
// block; every kernel must launch whole waves of the device it runs on.
TEST(WAVE_SUITE, PartialWaveBreaksBlockSum) {
  const int threads = kWarp + kWarp / 2;
  std::vector<float> s(threads);
  run(threads, [&] {
    static float scratch[4];
    s[tid()] = block_sum(1.0f, scratch);
  });
  EXPECT_TRUE(std::isnan(s[0])) << "got " << s[0];
}

// ---- the checks catch a helper that hard-codes 32 lanes ----------------------------------

// warp_sum as it would be written for NVIDIA only: offsets start at 16, width 32.
__device__ __forceinline__ float warp_sum_assuming_32(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(MSA_FULL_MASK, v, o, 32);
  return v;
}
// Lane and wave numbering as it would be written for NVIDIA only.
__device__ __forceinline__ float block_sum_assuming_32(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = 0.0f;
  for (int i = 0; i < nw; ++i) r += scratch[i];
  return r;
}

TEST(WAVE_SUITE, HardCoded32IsCaught) {
  const int n = 2 * kWarp;
  const int bad = segment_mismatches<kWarp>(
      n, [](float v) { return warp_sum_assuming_32(v); }, add, 0.0f);
  if (kWarp == 64) {
    EXPECT_EQ(bad, n) << "a 32-lane warp_sum must fail the wave-64 check on every lane";
  } else {
    EXPECT_EQ(bad, 0);
  }

  const std::vector<float> in = ints(256, 11);
  std::vector<float> out(256);
  run(256, [&] {
    static float scratch[32];
    out[tid()] = block_sum_assuming_32(in[tid()], scratch);
  });
  float want = 0;
  for (float x : in) want += x;
  if (kWarp == 64) {
    EXPECT_NE(out[0], want) << "a block sum numbering waves of 32 must fail at wave 64";
  } else {
    EXPECT_EQ(out[0], want);
  }
}

// A mask kept in 32 bits loses lanes 32..63 at wave 64.
TEST(WAVE_SUITE, LaneMasksAreWaveWide) {
  std::vector<int> full(kWarp), truncated(kWarp);
  run(kWarp, [&] {
    const msa_lane_mask_t m = __ballot_sync(MSA_FULL_MASK, 1);
    const unsigned m32 = static_cast<unsigned>(__ballot_sync(MSA_FULL_MASK, 1));
    full[tid()] = __popcll(static_cast<unsigned long long>(m));
    truncated[tid()] = __popc(m32);
  });
  EXPECT_EQ(full[0], kWarp);
  EXPECT_EQ(truncated[0], 32) << "a 32-bit mask holds 32 lanes at most";
  EXPECT_EQ(sizeof(msa_lane_mask_t) * 8 >= static_cast<size_t>(kWarp), true);
}

// ---- scalar helpers (no lanes involved): bit-exact against msa's host conversions -------

std::vector<float> sample_floats() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          448.0f,
                          464.0f,
                          465.0f,
                          -500.0f,
                          1e-3f,
                          1e-9f,
                          65504.0f,
                          65520.0f,
                          1e30f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    v.push_back(f);
    v.push_back(std::ldexp(static_cast<float>(static_cast<int>(rng() % 20001) - 10000), -static_cast<int>(rng() % 30)));
  }
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(WAVE_SUITE, ConversionsMatchHost) {
  for (float f : sample_floats()) {
    const bool nan = f != f;
    if (nan) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(f))));
      EXPECT_TRUE(std::isnan(fp8_bits_to_f32(f32_to_fp8_bits(f))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16_bits(f), hal::f32_to_bf16(f)) << f;
    ASSERT_EQ(f32_to_f16_bits(f), hal::f32_to_f16(f)) << f;
    ASSERT_EQ(f32_to_fp8_bits(f), hal::f32_to_fp8_e4m3(f)) << f;
    const uint16_t b = hal::f32_to_bf16(f), h = hal::f32_to_f16(f);
    const uint8_t q = hal::f32_to_fp8_e4m3(f);
    ASSERT_EQ(bits(bf16_bits_to_f32(b)), bits(hal::bf16_to_f32(b))) << f;
    ASSERT_EQ(bits(f16_bits_to_f32(h)), bits(hal::f16_to_f32(h))) << f;
    const float fq = fp8_bits_to_f32(q), hq = hal::fp8_e4m3_to_f32(q);
    if (hq != hq)
      ASSERT_TRUE(fq != fq);
    else
      ASSERT_EQ(bits(fq), bits(hq)) << f;
  }
}

TEST(WAVE_SUITE, OrderedKeysAreMonotonic) {
  std::vector<float> v = sample_floats();
  std::vector<float> finite;
  for (float f : v)
    if (!std::isnan(f)) finite.push_back(f);
  std::sort(finite.begin(), finite.end());
  for (size_t i = 1; i < finite.size(); ++i) {
    const uint32_t a = ordered_key(finite[i - 1]), b = ordered_key(finite[i]);
    ASSERT_LE(a, b) << finite[i - 1] << " " << finite[i];
    if (finite[i - 1] < finite[i]) {
      ASSERT_LT(a, b) << finite[i - 1] << " " << finite[i];
    }
  }
  EXPECT_EQ(ordered_key(std::numeric_limits<float>::quiet_NaN()), ordered_key(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(ordered_key(-0.0f), ordered_key(0.0f));
  EXPECT_GT(ordered_key(-std::numeric_limits<float>::infinity()), 0u);
}

}  // namespace
}  // namespace msa::MSA_GPU_NS
