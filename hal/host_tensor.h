// hal::HostTensor: an owned tensor in host memory (dtype + shape + bytes), used by file
// I/O, the cross-check, the model loader and tests. Moves to and from a device through
// the device's stream.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hal/device.h"
#include "hal/dtype.h"
#include "hal/export.h"

namespace msa::hal {

struct MSA_API HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  // Zero-filled tensor of this dtype and shape (dims must be >= 0).
  HostTensor(DType t, std::vector<int64_t> dims);

  int64_t numel() const;
  size_t nbytes() const { return bytes.size(); }
  template <typename T>
  T* data() {
    return reinterpret_cast<T*>(bytes.data());
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(bytes.data());
  }
  // Element i as float (i32 converted) / stores float x (rounded to dtype).
  float get(size_t i) const { return load_as_f32(dtype, bytes.data(), i); }
  void set(size_t i, float x) { store_from_f32(dtype, bytes.data(), i, x); }
  // All elements as floats.
  std::vector<float> to_f32() const;
  // "bf16[4, 128]"
  std::string str() const;
};

// Allocates a device tensor of the same dtype/shape and uploads the bytes.
MSA_API Device::Owned to_device(Device& device, const HostTensor& host);
// Downloads a device tensor (waits for the stream).
MSA_API HostTensor to_host(Device& device, const Tensor& t);

}  // namespace msa::hal
