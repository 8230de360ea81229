#include "tools/op_io.h"

#include <algorithm>
#include <cstdint>

#include "hal/error.h"

namespace msa::cli {

OpIo::OpIo(hal::Device& device, std::map<std::string, hal::HostTensor> inputs)
    : device_(device), inputs_(std::move(inputs)) {}

hal::Tensor OpIo::upload(const std::string& name, const hal::HostTensor& h) {
  if (h.shape.size() > static_cast<size_t>(hal::kMaxRank))
    throw Error("input tensor '" + name + "': rank " + std::to_string(h.shape.size()) + " above 4");
  auto owned = hal::to_device(device_, h);
  buffers_.push_back(std::move(owned.buffer));
  return owned.tensor;
}

hal::Tensor OpIo::opt(const std::string& name) {
  auto it = inputs_.find(name);
  if (it == inputs_.end()) return {};
  used_.insert(name);
  return upload(name, it->second);
}

hal::Tensor OpIo::in(const std::string& name) {
  if (!inputs_.count(name)) throw Error("input tensor '" + name + "': missing from the --in file");
  return opt(name);
}

std::vector<int32_t> OpIo::host_i32(const std::string& name) {
  auto it = inputs_.find(name);
  if (it == inputs_.end()) throw Error("input tensor '" + name + "': missing from the --in file");
  if (it->second.dtype != hal::DType::i32) throw Error("input tensor '" + name + "': must be i32");
  const auto* p = it->second.data<int32_t>();
  return std::vector<int32_t>(p, p + it->second.numel());
}

hal::Tensor OpIo::out(const std::string& name, hal::DType dtype, std::vector<int64_t> shape) {
  // Allocated and poisoned on the device, whose alloc refuses what does not fit (an
  // msa::Error): no host copy of a size that comes from parameters.
  uint64_t bytes = hal::dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && bytes > UINT64_MAX / static_cast<uint64_t>(d)))
      throw Error("output tensor '" + name + "': a dim is negative or the size overflows");
    bytes *= static_cast<uint64_t>(d);
  }
  if (shape.size() > static_cast<size_t>(hal::kMaxRank))
    throw Error("output tensor '" + name + "': rank " + std::to_string(shape.size()) + " above 4");
  hal::BufferPtr buffer = device_.alloc(static_cast<size_t>(bytes));
  hal::Tensor t;
  t.buffer = buffer.get(), t.dtype = dtype, t.rank = static_cast<int>(shape.size());
  std::copy(shape.begin(), shape.end(), t.shape.begin());
  device_.stream().fill_bytes(t, 0xFF);
  buffers_.push_back(std::move(buffer));
  outputs_[name] = t;
  return t;
}

hal::Tensor OpIo::inout(const std::string& name, bool required) {
  auto it = inputs_.find(name);
  if (it == inputs_.end()) {
    if (required) throw Error("input tensor '" + name + "': missing from the --in file");
    return {};
  }
  used_.insert(name);
  hal::Tensor t = upload(name, it->second);
  outputs_[name] = t;
  return t;
}

void OpIo::check_all_used(const std::string& op) const {
  for (const auto& [name, t] : inputs_)
    if (!used_.count(name)) throw Error("input tensor '" + name + "': not an input of op " + op);
}

std::map<std::string, hal::HostTensor> OpIo::results() {
  device_.stream().synchronize();
  std::map<std::string, hal::HostTensor> r;
  for (const auto& [name, t] : outputs_) r[name] = hal::to_host(device_, t);
  return r;
}

}  // namespace msa::cli
