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

namespace msa::test {

using hal::DType;

inline const DType kActDTypes[] = {DType::f32, DType::bf16, DType::f16};

class RefDevice {
 public:
  RefDevice() : dev_(hal::create_device("cpu-ref")) {}

  // Uploads `vals` (rounded to t) as a tensor of shape `shape`.
  hal::Tensor make(DType t, std::vector<int64_t> shape, const std::vector<float>& vals) {
    hal::HostTensor h(t, std::move(shape));
    EXPECT_EQ(static_cast<size_t>(h.numel()), vals.size());
    for (size_t i = 0; i < vals.size(); ++i) h.set(i, vals[i]);
    return keep(h);
  }
  hal::Tensor make_i32(std::vector<int64_t> shape, const std::vector<int32_t>& vals) {
    hal::HostTensor h(DType::i32, std::move(shape));
    EXPECT_EQ(static_cast<size_t>(h.numel()), vals.size());
    for (size_t i = 0; i < vals.size(); ++i) h.data<int32_t>()[i] = vals[i];
    return keep(h);
  }
  // An output tensor poisoned with NaN bytes (0xFF).
  hal::Tensor out(DType t, std::vector<int64_t> shape) {
    hal::HostTensor h(t, std::move(shape));
    std::fill(h.bytes.begin(), h.bytes.end(), uint8_t{0xFF});
    return keep(h);
  }
  std::vector<float> get(const hal::Tensor& t) { return hal::to_host(*dev_, t).to_f32(); }
  std::vector<int32_t> get_i32(const hal::Tensor& t) {
    hal::HostTensor h = hal::to_host(*dev_, t);
    return {h.data<int32_t>(), h.data<int32_t>() + h.numel()};
  }

  template <typename Args>
  void run(hal::OpId op, const Args& a) {
    const auto& e = dev_->kernels()[op];
    ASSERT_TRUE(static_cast<bool>(e.run)) << hal::op_name(op) << ": " << e.reason;
    e.run(dev_->stream(), &a);
  }

 private:
  hal::Tensor keep(const hal::HostTensor& h) {
    owned_.push_back(hal::to_device(*dev_, h));
    return owned_.back().tensor;
  }
  std::unique_ptr<hal::Device> dev_;
  std::vector<hal::Device::Owned> owned_;
};

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
    case DType::bf16: return 1.0 / 256;
    case DType::f16: return 1.0 / 2048;
    default: return 2e-7;
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
