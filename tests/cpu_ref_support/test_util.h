// Helpers for the cpu-ref supporting-op tests: a cpu-ref device, tensors from host
// values (rounded to their dtype on upload), and running one kernel straight from the
// device's kernel table (so these tests exercise the kernels, not the ops:: checks).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/args.h"
#include "tests/common/ref_device.h"

namespace msa::test {

using hal::DType;

inline const DType kActDTypes[] = {DType::f32, DType::bf16, DType::f16};

// Seeded uniform values in [lo, hi), already rounded to t.
inline std::vector<float> random_values(size_t n, DType t, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = hal::round_to(t, u(rng));
  return v;
}

// Relative tolerance of one rounding to t (half an ulp, plus slack for f64->f32->t).
inline double round_tol(DType t) {
  switch (t) {
    case DType::bf16:
      return 1.0 / 256;
    case DType::f16:
      return 1.0 / 2048;
    default:
      return 2e-7;
  }
}

// Expects `fn` to throw msa::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected msa::Error";
  } catch (const msa::Error& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace msa::test
