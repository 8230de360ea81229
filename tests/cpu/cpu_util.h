// Helpers for the `cpu` backend tests: the same inputs on a `cpu` and a `cpu-ref` device,
// a varlen paged batch with NaN in every cache slot that is not a valid token, and the
// contract's comparison metrics (docs/spec.md, "Cross-check tolerances").
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace msa::cpu_test {

// The activation dtypes a test loops over: f32, bf16 and f16, or bf16 alone with
// MSA_TEST_ONE_DTYPE set (CI's ThreadSanitizer job: the cpu backend plans its tasks from
// the shapes, never the dtype, so one dtype runs every threaded path; the other jobs keep
// all three).
inline std::vector<hal::DType> act_dtypes() {
  if (std::getenv("MSA_TEST_ONE_DTYPE") != nullptr) return {hal::DType::bf16};
  return {hal::DType::f32, hal::DType::bf16, hal::DType::f16};
}

using hal::DType;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();

// Skips the test when the cpu backend is not compiled in.
#define MSA_REQUIRE_CPU_BACKEND()                              \
  do {                                                         \
    try {                                                      \
      (void)hal::create_device("cpu");                         \
    } catch (const Error& e) {                                 \
      GTEST_SKIP() << "cpu backend unavailable: " << e.what(); \
    }                                                          \
  } while (0)

// Sets MSA_CPU_THREADS for the ops that follow (the backend reads it per call).
inline void set_threads(int n) { setenv("MSA_CPU_THREADS", std::to_string(n).c_str(), 1); }

// One device plus the tensors made on it.
class Dev {
 public:
  explicit Dev(const char* name) : dev_(hal::create_device(name)) {}
  hal::Device& device() { return *dev_; }
  hal::Tensor put(const hal::HostTensor& h) {
    owned_.push_back(hal::to_device(*dev_, h));
    return owned_.back().tensor;
  }
  // An output poisoned with 0xFF bytes (NaN for floats, -1 for i32).
  hal::Tensor out(DType t, std::vector<int64_t> shape) {
    hal::HostTensor h(t, std::move(shape));
    std::fill(h.bytes.begin(), h.bytes.end(), uint8_t{0xFF});
    return put(h);
  }
  hal::HostTensor get(const hal::Tensor& t) { return hal::to_host(*dev_, t); }

 private:
  std::unique_ptr<hal::Device> dev_;
  std::vector<hal::Device::Owned> owned_;
};

// The two devices of a comparison.
struct Pair {
  Dev cpu{"cpu"}, ref{"cpu-ref"};
};

inline hal::HostTensor host(DType t, std::vector<int64_t> shape, const std::vector<float>& v) {
  hal::HostTensor h(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) h.set(i, v[i]);
  return h;
}
inline hal::HostTensor host_i32(std::vector<int64_t> shape, const std::vector<int32_t>& v) {
  hal::HostTensor h(DType::i32, std::move(shape));
  std::copy(v.begin(), v.end(), h.data<int32_t>());
  return h;
}

inline std::vector<float> random_values(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// A varlen batch on a paged cache: pages shuffled, spare pages unused, block_table
// entries past each sequence's last block hold out-of-range ids (never to be read).
struct Layout {
  int B = 0, Bs = 1, P = 0, max_blocks = 0;
  int64_t T = 0;
  std::vector<int32_t> q_len, kv_len, cu_q, block_table;

  int n_blocks(int b) const { return (kv_len[b] + Bs - 1) / Bs; }
  int page(int b, int c) const { return block_table[b * max_blocks + c]; }
  int64_t nq(int Qb) const { return ops::count_query_blocks(cu_q, kv_len, Qb); }
};

inline Layout make_layout(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, uint64_t seed) {
  Layout L;
  L.B = static_cast<int>(q_lens.size());
  L.Bs = Bs;
  L.q_len.assign(q_lens.begin(), q_lens.end());
  L.kv_len.assign(kv_lens.begin(), kv_lens.end());
  L.cu_q.push_back(0);
  int total = 0;
  for (int b = 0; b < L.B; ++b) {
    L.cu_q.push_back(L.cu_q.back() + q_lens[b]);
    L.max_blocks = std::max(L.max_blocks, L.n_blocks(b));
    total += L.n_blocks(b);
  }
  L.max_blocks += 2;
  L.T = L.cu_q.back();
  L.P = total + 3;
  std::vector<int32_t> pages(static_cast<size_t>(L.P));
  for (int i = 0; i < L.P; ++i) pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), std::mt19937_64(seed));
  L.block_table.assign(static_cast<size_t>(L.B) * L.max_blocks, 0);
  int next = 0;
  for (int b = 0; b < L.B; ++b)
    for (int c = 0; c < L.max_blocks; ++c)
      L.block_table[b * L.max_blocks + c] = c < L.n_blocks(b) ? pages[next++] : (c % 2 ? -7 : L.P + 100 + c);
  return L;
}

// A cache [P][heads][Bs][D] with random values in valid slots and NaN elsewhere.
inline std::vector<float> paged_values(const Layout& L, int heads, int D, uint64_t seed, float lo = -1.f,
                                       float hi = 1.f) {
  std::vector<float> v(static_cast<size_t>(L.P) * heads * L.Bs * D, kNaN);
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int b = 0; b < L.B; ++b)
    for (int s = 0; s < L.kv_len[b]; ++s)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < D; ++d)
          v[((static_cast<size_t>(L.page(b, s / L.Bs)) * heads + h) * L.Bs + s % L.Bs) * D + d] = u(g);
  return v;
}

// `out` tolerances: global NMSE and worst row NMSE (rows of `row` elements).
inline void expect_out_close(const hal::HostTensor& got, const hal::HostTensor& ref, int64_t row,
                             const std::string& what) {
  const bool f32 = ref.dtype == DType::f32;
  const double g_tol = f32 ? 1e-10 : 5e-5, r_tol = f32 ? 1e-8 : 2e-4;
  const std::vector<float> a = got.to_f32(), b = ref.to_f32();
  ASSERT_EQ(a.size(), b.size()) << what;
  double num = 0, den = 0, worst = 0;
  for (size_t r0 = 0; r0 < a.size(); r0 += static_cast<size_t>(row)) {
    double rn = 0, rd = 0;
    for (size_t i = r0; i < r0 + static_cast<size_t>(row); ++i) {
      ASSERT_FALSE(std::isnan(a[i])) << what << ": NaN at element " << i << " (ref " << b[i] << ")";
      const double d = static_cast<double>(a[i]) - b[i];
      rn += d * d;
      rd += static_cast<double>(b[i]) * b[i];
    }
    num += rn;
    den += rd;
    if (rd > 0)
      worst = std::max(worst, rn / rd);
    else
      ASSERT_EQ(rn, 0.0) << what << ": row " << r0 / row << " should be zero";
  }
  if (den > 0) EXPECT_LE(num / den, g_tol) << what << ": global NMSE";
  EXPECT_LE(worst, r_tol) << what << ": worst row NMSE";
}

// lse / block_score: -inf exactly where the reference has it, else relative tolerance.
inline void expect_scores_close(const hal::HostTensor& got, const hal::HostTensor& ref, bool f32_inputs,
                                const std::string& what) {
  const double tol = f32_inputs ? 1e-5 : 1e-3;
  const std::vector<float> a = got.to_f32(), b = ref.to_f32();
  ASSERT_EQ(a.size(), b.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < a.size() && bad < 5; ++i) {
    const bool ninf_ref = std::isinf(b[i]) && b[i] < 0, ninf = std::isinf(a[i]) && a[i] < 0;
    if (ninf_ref || ninf) {
      if (ninf_ref != ninf) ++bad;
      EXPECT_EQ(ninf, ninf_ref) << what << "[" << i << "]: got " << a[i] << ", ref " << b[i];
      continue;
    }
    const double err = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(err <= tol * std::max(1.0, std::fabs(static_cast<double>(b[i]))))) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << a[i] << ", ref " << b[i];
    }
  }
}

inline bool same_bytes(const hal::HostTensor& a, const hal::HostTensor& b) { return a.bytes == b.bytes; }

}  // namespace msa::cpu_test
