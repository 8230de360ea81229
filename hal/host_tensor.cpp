#include "hal/host_tensor.h"

#include <new>
#include <sstream>

#include "hal/error.h"
#include "hal/host_device.h"

namespace msa::hal {

HostTensor::HostTensor(DType t, std::vector<int64_t> dims) : dtype(t), shape(std::move(dims)) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("host tensor " + str() + ": negative dimension");
    if (d != 0 && n > (int64_t{1} << 40) / d) throw Error("host tensor " + str() + ": too many elements");
    n *= d;
  }
  const size_t size = static_cast<size_t>(n) * dtype_size(t), host = host_memory_bytes();
  if (host > 0 && size >= host)
    throw Error("host tensor " + str() + ": cannot allocate " + std::to_string(size) + " bytes: more than the host's " +
                std::to_string(host) + " bytes of memory");
  try {
    bytes.assign(size, 0);
  } catch (const std::bad_alloc&) {
    throw Error("host tensor " + str() + ": cannot allocate " + std::to_string(size) + " bytes of host memory");
  }
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
