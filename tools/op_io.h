// Tensors of one `msa op` run: inputs read from a safetensors file and uploaded to the
// device by name, outputs allocated on the device (NaN-poisoned) and written back.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hal/device.h"
#include "hal/host_tensor.h"

namespace msa::cli {

class OpIo {
 public:
  OpIo(hal::Device& device, std::map<std::string, hal::HostTensor> inputs);
  // A required input; throws msa::Error naming it when absent from the file.
  hal::Tensor in(const std::string& name);
  // An optional input (absent Tensor when not in the file).
  hal::Tensor opt(const std::string& name);
  // Host copy of an i32 input (for NQ and shapes); required.
  std::vector<int32_t> host_i32(const std::string& name);
  // A new output of this dtype and shape, filled with 0xFF bytes (NaN) until the op writes it.
  hal::Tensor out(const std::string& name, hal::DType dtype, std::vector<int64_t> shape);
  // An output that starts as a copy of input `name` (in/out tensors such as caches).
  hal::Tensor inout(const std::string& name, bool required);
  // Throws msa::Error naming an input tensor the op did not use.
  void check_all_used(const std::string& op) const;
  // Downloads every output.
  std::map<std::string, hal::HostTensor> results();

 private:
  hal::Tensor upload(const std::string& name, const hal::HostTensor& h);
  hal::Device& device_;
  std::map<std::string, hal::HostTensor> inputs_;
  std::set<std::string> used_;
  std::vector<hal::BufferPtr> buffers_;
  std::map<std::string, hal::Tensor> outputs_;
};

}  // namespace msa::cli
