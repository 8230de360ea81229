// Device tensors made for one run of the layer benchmarks, kept alive with it.
#pragma once
#include <vector>

#include "check/device_io.h"
#include "hal/device.h"
#include "hal/host_tensor.h"

namespace msa::cli {

struct DeviceTensorPool {
  std::vector<hal::BufferPtr> keep;
  size_t bytes = 0;  // held on the device
  // A device copy of h (an absent tensor for an empty h: an optional input not given).
  hal::Tensor up(hal::Device& d, const hal::HostTensor& h) {
    if (h.shape.empty()) return {};
    auto o = hal::to_device(d, h);
    bytes += h.nbytes();
    keep.push_back(std::move(o.buffer));
    return o.tensor;
  }
  // An uninitialised tensor (outputs, scratch).
  hal::Tensor make(hal::Device& d, hal::DType t, const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    const size_t nbytes = static_cast<size_t>(n) * hal::dtype_size(t);
    keep.push_back(d.alloc(nbytes));
    bytes += nbytes;
    return cases::make_view(keep.back().get(), 0, t, shape);
  }
};

}  // namespace msa::cli
