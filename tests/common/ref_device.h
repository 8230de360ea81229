// A cpu-ref device (or another, by name) plus the tensors a test made on it, for the
// reference's own tests (tests/cpu_ref, tests/cpu_ref_support) and tests comparing a
// backend with it. Header-only: tests/common builds no executable.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hal/host_tensor.h"
#include "hal/registry.h"

namespace msa::test {

class RefDevice {
 public:
  RefDevice() : dev_(hal::create_device("cpu-ref")) {}
  // Another backend's device with the same helpers (tests comparing it with cpu-ref).
  explicit RefDevice(const std::string& device) : dev_(hal::create_device(device)) {}
  hal::Device& device() { return *dev_; }

  // A tensor holding `vals` rounded to t (NaN stays NaN).
  hal::Tensor make(hal::DType t, std::vector<int64_t> shape, const std::vector<float>& vals) {
    hal::HostTensor h(t, std::move(shape));
    EXPECT_EQ(static_cast<size_t>(h.numel()), vals.size());
    for (size_t i = 0; i < vals.size(); ++i) h.set(i, vals[i]);
    return keep(h);
  }
  hal::Tensor make_i32(std::vector<int64_t> shape, const std::vector<int32_t>& vals) {
    hal::HostTensor h(hal::DType::i32, std::move(shape));
    EXPECT_EQ(static_cast<size_t>(h.numel()), vals.size());
    for (size_t i = 0; i < vals.size(); ++i) h.data<int32_t>()[i] = vals[i];
    return keep(h);
  }
  // An output poisoned with 0xFF bytes (NaN for floats, -1 for i32).
  hal::Tensor out(hal::DType t, std::vector<int64_t> shape) {
    hal::HostTensor h(t, std::move(shape));
    std::fill(h.bytes.begin(), h.bytes.end(), uint8_t{0xFF});
    return keep(h);
  }
  std::vector<float> get(const hal::Tensor& t) { return hal::to_host(*dev_, t).to_f32(); }
  std::vector<int32_t> get_i32(const hal::Tensor& t) {
    hal::HostTensor h = hal::to_host(*dev_, t);
    return {h.data<int32_t>(), h.data<int32_t>() + h.numel()};
  }
  std::vector<uint8_t> bytes(const hal::Tensor& t) { return hal::to_host(*dev_, t).bytes; }

  // Runs the backend kernel straight from the kernel table (no ops:: host checks), so
  // the kernel's own validation of index data is what is tested.
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

}  // namespace msa::test
