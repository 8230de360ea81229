#include "hal/device.h"

#include "hal/error.h"

namespace msa::hal {

std::string Device::supports(OpId op, const void* args) const {
  const KernelEntry& e = kernels()[op];
  if (!e.run) return e.reason;
  if (e.supports) return e.supports(args);
  return "";
}

Device::Owned Device::alloc_tensor(DType dtype, std::initializer_list<int64_t> shape) {
  Owned o;
  Tensor probe(nullptr, dtype, shape);
  o.buffer = alloc(probe.nbytes());
  o.tensor = Tensor(o.buffer.get(), dtype, shape);
  return o;
}

BufferPtr Device::wrap_memory(void* ptr, size_t bytes) {
  if (!host_accessible())
    throw Error(name() + ": wrap_memory: this backend's buffers are not addresses; upload into its own buffers");
  if (ptr == nullptr && bytes != 0) throw_arg_error(name() + ": wrap_memory", "ptr", "is null");
  return std::make_unique<Buffer>(*this, ptr, bytes, nullptr);
}

void Device::use_native_stream(void* native) {
  if (native != nullptr) throw Error(name() + ": use_native_stream: this backend has no native streams");
}

void Device::set_tuning(std::string_view knob, std::string_view value) {
  (void)value;
  throw ArgError(name() + ": argument 'tuning': no knob '" + std::string(knob) + "' (this device has none)");
}

}  // namespace msa::hal
