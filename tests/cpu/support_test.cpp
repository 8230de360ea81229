// cpu backend vs cpu-ref on the supporting ops it implements itself: kv_append (bit for
// bit, fp8 indexer keys with scales and NVFP4 codes with group scales included), matmul,
// rms_norm, rope, swiglu, add.
#include <gtest/gtest.h>

#include "tests/cpu/cpu_util.h"

namespace msa::cpu_test {
namespace {

TEST(CpuSupport, KvAppendIdenticalToReference) {
  MSA_REQUIRE_CPU_BACKEND();
  for (DType kt : {DType::bf16, DType::fp8_e4m3, DType::f32, DType::fp4_e2m1x2}) {
    const bool fp4 = kt == DType::fp4_e2m1x2;  // NVFP4: [P][Bs][Di/2] codes, [P][Bs][Di/16] e4m3 scales
    const Layout L = make_layout({3, 0, 70}, {130, 4, 70}, 64, 42);
    const int Hkv = 2, D = 64, Di = 48;
    const hal::HostTensor k = host(DType::bf16, {L.T, Hkv, D}, random_values(static_cast<size_t>(L.T) * Hkv * D, 1));
    const hal::HostTensor v = host(DType::bf16, {L.T, Hkv, D}, random_values(static_cast<size_t>(L.T) * Hkv * D, 2));
    std::vector<float> kiv = random_values(static_cast<size_t>(L.T) * Di, 3, -5.f, 5.f);
    for (int d = 0; d < Di; ++d) kiv[d] = 0.0f;  // an all-zero row: scale 1 (NVFP4: scale 0)
    if (fp4) {
      // Row 1: every E2M1 rounding boundary exactly (scale 1), NaN and -0 (code +0); a
      // group that saturates the scale at 448; a group of tiny values (e4m3 subnormal scale).
      const float ties[16] = {6.f,    0.75f,  0.25f, 1.25f, 1.75f, 2.5f, 3.5f,   5.f,
                              -0.25f, -0.75f, kNaN,  -6.f,  0.f,   -0.f, -1e-3f, 2.9f};
      for (int i = 0; i < 16; ++i) {
        kiv[Di + i] = ties[i];
        kiv[Di + 16 + i] = (i % 2 ? -1e5f : 3e3f) * static_cast<float>(i + 1);
        kiv[Di + 32 + i] = 1e-3f * static_cast<float>(i - 7);
      }
    }
    const hal::HostTensor ki = host(DType::f32, {L.T, Di}, kiv);
    auto run = [&](Dev& d) {
      ops::KvAppendArgs a;
      a.k = d.put(k);
      a.v = d.put(v);
      a.ki = d.put(ki);
      a.block_table = d.put(host_i32({L.B, L.max_blocks}, L.block_table));
      a.kv_len = d.put(host_i32({L.B}, L.kv_len));
      a.cu_q = d.put(host_i32({L.B + 1}, L.cu_q));
      a.k_cache = d.out(DType::bf16, {L.P, Hkv, L.Bs, D});
      a.v_cache = d.out(DType::bf16, {L.P, Hkv, L.Bs, D});
      a.ki_cache = d.out(kt, {L.P, L.Bs, fp4 ? Di / 2 : Di});
      if (kt == DType::fp8_e4m3) a.ki_scale = d.out(DType::f32, {L.P, L.Bs});
      if (fp4) a.ki_scale = d.out(DType::fp8_e4m3, {L.P, L.Bs, Di / 16});
      ops::kv_append(d.device(), a);
      std::vector<hal::HostTensor> r = {d.get(a.k_cache), d.get(a.v_cache), d.get(a.ki_cache)};
      if (a.ki_scale.present()) r.push_back(d.get(a.ki_scale));
      return r;
    };
    Pair dev;
    const auto got = run(dev.cpu), ref = run(dev.ref);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_bytes(got[i], ref[i])) << "output " << i << " differs, ki dtype " << hal::dtype_name(kt);
  }
}

TEST(CpuSupport, MatmulMatchesReference) {
  MSA_REQUIRE_CPU_BACKEND();
  struct S {
    int M, K, N;
    bool bias;
  };
  uint64_t seed = 50;
  for (const S& s : {S{1, 256, 300, true}, S{53, 600, 131, false}, S{100, 64, 256, true}, S{7, 37, 5, true}})
    for (DType t : act_dtypes()) {
      const hal::HostTensor x = host(t, {s.M, s.K}, random_values(static_cast<size_t>(s.M) * s.K, seed++));
      const hal::HostTensor w = host(t, {s.N, s.K}, random_values(static_cast<size_t>(s.N) * s.K, seed++));
      const hal::HostTensor b = host(t, {s.N}, random_values(static_cast<size_t>(s.N), seed++));
      auto run = [&](Dev& d) {
        ops::MatmulArgs a;
        a.x = d.put(x);
        a.w = d.put(w);
        if (s.bias) a.bias = d.put(b);
        a.y = d.out(t, {s.M, s.N});
        ops::matmul(d.device(), a);
        return d.get(a.y);
      };
      Pair dev;
      expect_out_close(run(dev.cpu), run(dev.ref), s.N,
                       "matmul " + std::to_string(s.M) + "x" + std::to_string(s.K) + "x" + std::to_string(s.N) + " " +
                           hal::dtype_name(t));
    }
}

TEST(CpuSupport, RmsNormRopeSwigluAddMatchReference) {
  MSA_REQUIRE_CPU_BACKEND();
  uint64_t seed = 70;
  for (DType t : act_dtypes()) {
    const std::string tn = hal::dtype_name(t);
    Pair dev;
    {  // rms_norm, both kinds, f32 weights and weights of x's dtype
      const hal::HostTensor x = host(t, {9, 200}, random_values(1800, seed++, -3.f, 3.f));
      for (bool gemma : {true, false})
        for (DType wt : {DType::f32, t}) {
          const hal::HostTensor w = host(wt, {200}, random_values(200, seed++));
          auto run = [&](Dev& d) {
            ops::RmsNormArgs a;
            a.x = d.put(x);
            a.w = d.put(w);
            a.kind = gemma ? ops::NormKind::gemma : ops::NormKind::plain;
            a.y = d.out(t, {9, 200});
            ops::rms_norm(d.device(), a);
            return d.get(a.y);
          };
          expect_out_close(run(dev.cpu), run(dev.ref), 200, "rms_norm " + tn);
        }
    }
    {  // rope: partial rotary dim, large positions, in place
      const int T = 6, H = 3, D = 128;
      const hal::HostTensor x = host(t, {T, H, D}, random_values(T * H * D, seed++));
      const hal::HostTensor pos = host_i32({T}, {0, 1, 17, 4095, 1000000, 524287});
      for (int rd : {64, 0}) {
        auto run = [&](Dev& d) {
          ops::RopeArgs a;
          a.x = d.put(x);
          a.pos = d.put(pos);
          a.rotary_dim = rd;
          a.theta = 5e6f;
          a.y = a.x;
          ops::rope(d.device(), a);
          return d.get(a.y);
        };
        expect_out_close(run(dev.cpu), run(dev.ref), D, "rope " + tn);
      }
    }
    {  // swiglu and add, with a length that leaves a vector tail
      const int n = 16384 + 37;
      const hal::HostTensor a0 = host(t, {1, n}, random_values(n, seed++, -12.f, 12.f));
      const hal::HostTensor b0 = host(t, {1, n}, random_values(n, seed++, -2.f, 2.f));
      auto run_sw = [&](Dev& d) {
        ops::SwigluArgs a;
        a.gate = d.put(a0);
        a.up = d.put(b0);
        a.y = d.out(t, {1, n});
        ops::swiglu(d.device(), a);
        return d.get(a.y);
      };
      auto run_add = [&](Dev& d) {
        ops::AddArgs a;
        a.a = d.put(a0);
        a.b = d.put(b0);
        a.y = d.out(t, {1, n});
        ops::add(d.device(), a);
        return d.get(a.y);
      };
      expect_out_close(run_sw(dev.cpu), run_sw(dev.ref), n, "swiglu " + tn);
      expect_out_close(run_add(dev.cpu), run_add(dev.ref), n, "add " + tn);
    }
  }
}

TEST(CpuSupport, EveryOpIsAvailable) {
  MSA_REQUIRE_CPU_BACKEND();
  auto d = hal::create_device("cpu");
  for (int i = 0; i < hal::kKernelOpCount; ++i)  // composite ops run as their parts
    EXPECT_TRUE(d->kernels().has(static_cast<hal::OpId>(i))) << hal::op_name(static_cast<hal::OpId>(i));
  const auto backends = hal::list_backends();
  for (const auto& b : backends)
    if (b.name == "cpu") {
      ASSERT_EQ(b.devices.size(), 1u);
      EXPECT_NE(b.descriptions[0].find("threads"), std::string::npos) << b.descriptions[0];
    }
}

}  // namespace
}  // namespace msa::cpu_test
