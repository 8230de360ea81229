#include "model/device_weights.h"

#include "hal/error.h"

namespace msa::model {

DeviceWeights::DeviceWeights(hal::Device& device, const Weights& w, hal::DType dtype) : device_(device), dtype_(dtype) {
  MSA_CHECK_ARG(hal::is_activation_dtype(dtype), "model", "dtype",
                std::string("must be f32, f16 or bf16, got ") + hal::dtype_name(dtype));
  for (const auto& [name, host] : w.tensors) {
    hal::Device::Owned o;
    if (host.dtype == dtype) {
      o = hal::to_device(device, host);
    } else {
      hal::HostTensor conv(dtype, host.shape);
      const size_t n = static_cast<size_t>(host.numel());
      for (size_t i = 0; i < n; ++i) conv.set(i, host.get(i));
      o = hal::to_device(device, conv);
    }
    bytes_ += o.tensor.nbytes();
    t_.emplace(name, std::move(o));
  }
}

const hal::Tensor& DeviceWeights::get(const std::string& name) const {
  auto it = t_.find(name);
  if (it == t_.end()) throw Error("weights: tensor '" + name + "' is missing");
  return it->second.tensor;
}

}  // namespace msa::model
