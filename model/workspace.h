// model::Workspace: named scratch tensors on one device, reused from call to call so a
// steady decode loop allocates nothing. A slot grows (by reallocation) when a larger
// tensor is asked for; views taken earlier from that slot are then invalid, so one
// forward pass must not ask one slot for two different sizes while both are live.
#pragma once
#include <initializer_list>
#include <map>
#include <string>

#include "hal/device.h"
#include "hal/export.h"

namespace msa::model {

class MSA_API Workspace {
 public:
  explicit Workspace(hal::Device& device) : device_(device) {}
  // A contiguous tensor of this dtype and shape in slot `slot` (contents undefined).
  hal::Tensor get(const std::string& slot, hal::DType dtype, std::initializer_list<int64_t> shape);
  // Bytes held by all slots.
  size_t bytes() const;
  hal::Device& device() const { return device_; }

 private:
  hal::Device& device_;
  std::map<std::string, hal::BufferPtr> slots_;
};

}  // namespace msa::model
