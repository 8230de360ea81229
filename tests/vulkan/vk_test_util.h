// Fixture for the Vulkan backend tests: opens vulkan:0 (skipping with the reason when
// there is no Vulkan device), owns the test's device buffers, and moves small host
// arrays to and from the device. Only the public hal/ops API is used.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/device.h"
#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"

namespace msa::vulkan_test {

using hal::DType;

// Sets an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* v = std::getenv(name)) old_ = v;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Sets a tuning knob of `device` (hal::Device::set_tuning) for a scope.
class ScopedTuning {
 public:
  ScopedTuning(hal::Device& device, const char* knob, const char* value) : device_(device), knob_(knob) {
    for (const auto& k : device.tuning())
      if (k.name == knob) old_ = std::to_string(k.value);
    device.set_tuning(knob, value);
  }
  ~ScopedTuning() { device_.set_tuning(knob_, old_); }

 private:
  hal::Device& device_;
  const char* knob_;
  std::string old_ = "0";
};

// Global NMSE of x against ref (NaN counts as a failure: returns +inf).
inline double nmse(const std::vector<float>& x, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return INFINITY;
    num += (double(x[i]) - ref[i]) * (double(x[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      dev_ = hal::create_device("vulkan");
    } catch (const Error& e) {
      GTEST_SKIP() << "no Vulkan device: " << e.what();
    }
  }

  hal::Device& dev() { return *dev_; }

  // A device tensor holding `vals` rounded to t.
  hal::Tensor make(DType t, std::vector<int64_t> shape, const std::vector<float>& vals) {
    hal::HostTensor h(t, std::move(shape));
    EXPECT_EQ(static_cast<size_t>(h.numel()), vals.size());
    for (size_t i = 0; i < vals.size(); ++i) h.set(i, vals[i]);
    return keep(h);
  }
  hal::Tensor make_i32(std::vector<int64_t> shape, const std::vector<int32_t>& vals) {
    hal::HostTensor h(DType::i32, std::move(shape));
    EXPECT_EQ(static_cast<size_t>(h.numel()), vals.size());
    std::copy(vals.begin(), vals.end(), h.data<int32_t>());
    return keep(h);
  }
  // An output filled with 0xFF bytes (NaN for floats, -1 for i32).
  hal::Tensor out(DType t, std::vector<int64_t> shape) {
    hal::HostTensor h(t, std::move(shape));
    std::fill(h.bytes.begin(), h.bytes.end(), uint8_t{0xFF});
    return keep(h);
  }
  // A raw buffer of `bytes` bytes owned by the test.
  hal::Buffer* buffer(size_t bytes) {
    buffers_.push_back(dev_->alloc(bytes));
    return buffers_.back().get();
  }
  std::vector<float> get(const hal::Tensor& t) { return hal::to_host(*dev_, t).to_f32(); }
  std::vector<int32_t> get_i32(const hal::Tensor& t) {
    hal::HostTensor h = hal::to_host(*dev_, t);
    return {h.data<int32_t>(), h.data<int32_t>() + h.numel()};
  }
  std::vector<uint8_t> bytes(const hal::Tensor& t) { return hal::to_host(*dev_, t).bytes; }

  // Expects the next synchronize() to raise msa::Error mentioning every needle, and the
  // one after it to be clean (the flags were reset).
  void expect_device_error(const std::vector<std::string>& needles) {
    try {
      dev_->stream().synchronize();
      ADD_FAILURE() << "synchronize() raised nothing";
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const auto& n : needles) EXPECT_NE(what.find(n), std::string::npos) << "'" << n << "' not in: " << what;
    }
    EXPECT_NO_THROW(dev_->stream().synchronize());
  }

 private:
  hal::Tensor keep(const hal::HostTensor& h) {
    auto o = hal::to_device(*dev_, h);
    buffers_.push_back(std::move(o.buffer));
    return o.tensor;
  }

  std::unique_ptr<hal::Device> dev_;
  std::vector<hal::BufferPtr> buffers_;  // destroyed before dev_

 protected:
  // Buffers go before the device: declared after it, destroyed first.
  void TearDown() override { buffers_.clear(); }
};

}  // namespace msa::vulkan_test
