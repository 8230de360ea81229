#include "hal/device.h"

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

}  // namespace msa::hal
