#include "bench/ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "check/device_io.h"
#include "ops/ops.h"
#include "tools/median.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define MSA_BENCH_X86 1
#endif

namespace msa::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int threads() { return std::max(1u, std::thread::hardware_concurrency()); }

using cli::median;

// All threads copy their slice of a 256 MiB buffer; read + write bytes per second.
double cpu_memcpy_rate() {
  const size_t n = size_t{256} << 20;
  std::vector<char> src(n, 1), dst(n, 0);
  const int nt = threads();
  std::vector<double> rates;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int i = 0; i < nt; ++i)
      ts.emplace_back([&, i] {
        const size_t a = n * i / nt, b = n * (i + 1) / nt;
        std::memcpy(dst.data() + a, src.data() + a, b - a);
      });
    for (auto& t : ts) t.join();
    rates.push_back(2.0 * n / seconds_since(t0));
  }
  return median(rates);
}

// FLOPs of `iters` rounds of 12 independent FMA chains of `lanes` floats.
#ifdef MSA_BENCH_X86
__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  __m512 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm512_set1_ps(1.0f + j * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm512_fmadd_ps(a[j], m, b);
  __m512 s = a[0];
  for (int j = 1; j < 12; ++j) s = _mm512_add_ps(s, a[j]);
  return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  __m256 a[12];
  for (int j = 0; j < 12; ++j) a[j] = _mm256_set1_ps(1.0f + j * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) a[j] = _mm256_fmadd_ps(a[j], m, b);
  float out[8];
  __m256 s = a[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, a[j]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
#endif
float fma_scalar(int64_t iters) {
  float a[12];
  for (int j = 0; j < 12; ++j) a[j] = 1.0f + j * 1e-3f;
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) a[j] = a[j] * 0.9999999f + 1e-7f;
  float s = 0;
  for (float x : a) s += x;
  return s;
}

// Peak f32 FMA rate over all threads, with the widest vectors this CPU has.
double cpu_fma_rate(std::string& isa) {
  float (*fn)(int64_t) = &fma_scalar;
  int lanes = 1;
  isa = "scalar";
#ifdef MSA_BENCH_X86
  if (__builtin_cpu_supports("avx512f")) {
    fn = &fma_avx512;
    lanes = 16;
    isa = "avx512f";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    fn = &fma_avx2;
    lanes = 8;
    isa = "avx2+fma";
  }
#endif
  const int64_t iters = lanes > 1 ? 20'000'000 : 5'000'000;
  const int nt = threads();
  std::vector<double> rates;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<float> sink(static_cast<size_t>(nt));
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int i = 0; i < nt; ++i) ts.emplace_back([&, i] { sink[static_cast<size_t>(i)] = fn(iters); });
    for (auto& t : ts) t.join();
    const double s = seconds_since(t0);
    volatile float keep = sink[0];
    (void)keep;
    rates.push_back(2.0 * 12 * lanes * static_cast<double>(iters) * nt / s);
  }
  return median(rates);
}

double time_on_stream(hal::Device& dev, int reps, const std::function<void()>& fn) {
  auto e0 = dev.create_event(), e1 = dev.create_event();
  fn();  // warm-up
  dev.stream().synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    dev.stream().record(*e0);
    fn();
    dev.stream().record(*e1);
    dev.stream().synchronize();
    ms.push_back(e1->elapsed_ms(*e0));
  }
  return median(ms) / 1e3;
}

// Device-to-device copy of 1 GiB (or the largest power of two down to 64 MiB the device
// allocates: lavapipe caps buffers at 128 MiB).
double device_copy_rate(hal::Device& dev, size_t& n) {
  hal::BufferPtr a, b;
  for (n = size_t{1} << 30;; n /= 2) {
    try {
      a = dev.alloc(n);
      b = dev.alloc(n);
      break;
    } catch (const std::exception&) {
      a.reset();
      b.reset();
      if (n <= (size_t{64} << 20)) throw;
    }
  }
  const hal::Tensor ta = cases::make_view(a.get(), 0, hal::DType::fp8_e4m3, {static_cast<int64_t>(n)});
  const hal::Tensor tb = cases::make_view(b.get(), 0, hal::DType::fp8_e4m3, {static_cast<int64_t>(n)});
  dev.stream().fill_bytes(ta, 0x3c);
  const double s = time_on_stream(dev, 10, [&] { dev.stream().copy(tb, ta); });
  return 2.0 * n / s;
}

// bf16 n^3 matrix product through ops::matmul when the backend has it (else 0): 8192^3,
// unless a 1024^3 product shows the device is too slow for that (a software driver).
double matmul_rate(hal::Device& dev, int64_t n) {
  auto x = dev.alloc_tensor(hal::DType::bf16, {n, n});
  auto w = dev.alloc_tensor(hal::DType::bf16, {n, n});
  auto y = dev.alloc_tensor(hal::DType::bf16, {n, n});
  dev.stream().fill_bytes(x.tensor, 0x3c);
  dev.stream().fill_bytes(w.tensor, 0x3c);
  ops::MatmulArgs a;
  a.x = x.tensor;
  a.w = w.tensor;
  a.y = y.tensor;
  if (!dev.supports(hal::OpId::matmul, &a).empty()) return 0;
  const double s = time_on_stream(dev, n >= 8192 ? 5 : 2, [&] { ops::matmul(dev, a); });
  return 2.0 * n * n * n / s;
}

double device_matmul_rate(hal::Device& dev, int64_t& n) {
  n = 1024;
  const double small = matmul_rate(dev, n);
  if (small <= 0) return 0;
  if (2.0 * 8192.0 * 8192.0 * 8192.0 / small > 5.0) return small;
  n = 8192;
  return matmul_rate(dev, n);
}

}  // namespace

Ceiling measure_ceiling(hal::Device& dev) {
  Ceiling c;
  if (dev.host_accessible()) {
    std::string isa;
    c.bytes_per_s = cpu_memcpy_rate();
    c.flops_per_s = cpu_fma_rate(isa);
    c.how = "memcpy 256 MiB and f32 FMA (" + isa + ") on " + std::to_string(threads()) + " threads";
  } else {
    size_t n = 0;
    c.bytes_per_s = device_copy_rate(dev, n);
    int64_t mn = 0;
    try {
      c.flops_per_s = device_matmul_rate(dev, mn);
    } catch (const std::exception&) {
      c.flops_per_s = 0;
    }
    c.how = "device copy " + std::to_string(n >> 20) + " MiB";
    if (c.flops_per_s > 0) c.how += ", bf16 matmul " + std::to_string(mn) + "^3";
  }
  return c;
}

}  // namespace msa::bench
