// model::DeviceWeights: a model's tensors uploaded to one device in one activation dtype
// (converted on the host when the file's dtype differs).
#pragma once
#include <map>
#include <string>

#include "hal/device.h"
#include "hal/export.h"
#include "model/weights.h"

namespace msa::model {

class MSA_API DeviceWeights {
 public:
  // Uploads every tensor of `w` to `device` as `dtype` (f32, f16 or bf16).
  DeviceWeights(hal::Device& device, const Weights& w, hal::DType dtype);
  // The tensor `name`; throws msa::Error naming it when absent.
  const hal::Tensor& get(const std::string& name) const;
  bool has(const std::string& name) const { return t_.count(name) != 0; }
  hal::DType dtype() const { return dtype_; }
  hal::Device& device() const { return device_; }
  size_t bytes() const { return bytes_; }

 private:
  hal::Device& device_;
  hal::DType dtype_;
  std::map<std::string, hal::Device::Owned> t_;
  size_t bytes_ = 0;
};

}  // namespace msa::model
