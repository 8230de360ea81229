#include "hal/host_tensor.h"

#include <sstream>

#include "hal/error.h"

namespace msa::hal {

HostTensor::HostTensor(DType t, std::vector<int64_t> dims) : dtype(t), shape(std::move(dims)) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("host tensor: negative dimension");
    if (d != 0 && n > (int64_t{1} << 40) / d) throw Error("host tensor: too many elements");
    n *= d;
  }
  bytes.assign(static_cast<size_t>(n) * dtype_size(t), 0);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> HostTensor::to_f32() const {
  std::vector<float> v(static_cast<size_t>(numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = get(i);
  return v;
}

std::string HostTensor::str() const {
  std::ostringstream s;
  s << dtype_name(dtype) << "[";
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << "]";
  return s.str();
}

namespace {
Tensor view_of(Buffer* b, const HostTensor& h) {
  if (h.shape.size() > static_cast<size_t>(kMaxRank)) throw Error("host tensor " + h.str() + ": rank above 4");
  Tensor t;
  t.buffer = b;
  t.dtype = h.dtype;
  t.rank = static_cast<int>(h.shape.size());
  for (int i = 0; i < t.rank; ++i) t.shape[i] = h.shape[i];
  return t;
}
}  // namespace

Device::Owned to_device(Device& device, const HostTensor& host) {
  Device::Owned o;
  o.buffer = device.alloc(host.nbytes());
  o.tensor = view_of(o.buffer.get(), host);
  device.stream().upload(o.tensor, host.bytes.data());
  return o;
}

HostTensor to_host(Device& device, const Tensor& t) {
  std::vector<int64_t> dims(t.shape.begin(), t.shape.begin() + t.rank);
  HostTensor h(t.dtype, dims);
  device.stream().download(h.bytes.data(), t);
  return h;
}

}  // namespace msa::hal
