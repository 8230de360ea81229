#include "python/src/call.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <unordered_map>

#include "hal/error.h"
#include "hal/registry.h"

namespace msa::python {
namespace {

// Wrapped buffers start at an address aligned this far down, so that every tensor's
// offset from it keeps the tensor's own alignment.
constexpr uintptr_t kBaseAlign = 256;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

hal::Tensor make_tensor(hal::Buffer* buffer, size_t offset, const TensorView& v) {
  hal::Tensor t;
  t.buffer = buffer;
  t.offset = offset;
  t.dtype = v.dtype;
  t.rank = v.rank;
  for (int i = 0; i < v.rank; ++i) t.shape[i] = v.shape[i];
  return t;
}

// The CUDA ordinal of a device named "cuda:N", else -1.
int cuda_ordinal(const hal::Device& d) {
  const std::string n = d.name();
  if (n.rfind("cuda:", 0) != 0) return -1;
  return std::stoi(n.substr(5));
}

}  // namespace

hal::Device& cached_device(const std::string& name) {
  // Never destroyed: devices outlive the interpreter's teardown (the CUDA runtime may be
  // gone by then), as torch's own CUDA state does.
  static auto* devices = new std::unordered_map<std::string, hal::Device*>();
  const std::string key = lower(name);
  if (auto it = devices->find(key); it != devices->end()) return *it->second;
  std::unique_ptr<hal::Device> d = hal::create_device(key);
  hal::Device* raw = d.get();
  if (auto it = devices->find(lower(raw->name())); it != devices->end()) {
    (*devices)[key] = it->second;  // "cuda" and "cuda:0" are one device
    return *it->second;
  }
  d.release();
  (*devices)[key] = raw;
  (*devices)[lower(raw->name())] = raw;
  return *raw;
}

const std::string& default_host_device() {
  static const std::string name = [] {
    for (const auto& b : hal::list_backends())
      if (b.name == "cpu" && b.compiled && !b.devices.empty()) return std::string("cpu");
    return std::string("cpu-ref");
  }();
  return name;
}

void* native_stream(uint64_t raw) {
  // CUDA's cudaStreamLegacy names the legacy default stream (torch's default stream, raw
  // value 0) to hal::Device::use_native_stream, whose nullptr means "own stream".
  return raw == 0 ? reinterpret_cast<void*>(uintptr_t{1}) : reinterpret_cast<void*>(raw);
}

hal::Device& host_device() {
  static hal::Device* device = &cached_device(default_host_device());
  return *device;
}

hal::Device& cuda_device(int ordinal) {
  // One lookup by name per ordinal; later calls index this table.
  static std::vector<hal::Device*> devices;
  if (ordinal < 0) throw Error("CUDA device ordinal " + std::to_string(ordinal) + " is negative");
  if (static_cast<size_t>(ordinal) >= devices.size()) devices.resize(static_cast<size_t>(ordinal) + 1, nullptr);
  hal::Device*& d = devices[static_cast<size_t>(ordinal)];
  if (d == nullptr) d = &cached_device("cuda:" + std::to_string(ordinal));
  return *d;
}

Call::Call(std::string op, std::string backend, uint64_t stream)
    : op_(std::move(op)), backend_(std::move(backend)), stream_(stream) {
  args_.reserve(12);
}

Call::~Call() {
  if (native_stream_) {
    try {
      device_->use_native_stream(nullptr);
    } catch (...) {
    }
  }
}

int Call::arg(const char* name, py::handle obj, Role role, ByteRole bytes) {
  Arg a;
  a.name = name;
  a.role = role;
  if (!obj.is_none()) a.view = view_of(obj, op_, name, bytes);
  args_.push_back(std::move(a));
  return static_cast<int>(args_.size()) - 1;
}

void Call::narrow(Arg& a) const {
  const TensorView& v = *a.view;
  if (!v.int64_index) return;
  if (a.role != Role::in) throw_arg_error(op_, a.name, "outputs of index type must be int32, got int64");
  const auto* src = static_cast<const int64_t*>(v.data);
  const int64_t n = v.numel();
  a.narrowed.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (src[i] < std::numeric_limits<int32_t>::min() || src[i] > std::numeric_limits<int32_t>::max())
      throw_arg_error(
          op_, a.name,
          "int64 value " + std::to_string(src[i]) + " at flat index " + std::to_string(i) + " does not fit int32");
    a.narrowed[static_cast<size_t>(i)] = static_cast<int32_t>(src[i]);
  }
}

const void* Call::host_data(const Arg& a) const { return a.view->int64_index ? a.narrowed.data() : a.view->data; }

hal::Device& Call::bind() {
  const Arg* first = nullptr;
  for (const Arg& a : args_) {
    if (!a.view) continue;
    if (first == nullptr) {
      first = &a;
      continue;
    }
    if (a.view->memory != first->view->memory || a.view->device_id != first->view->device_id)
      throw_arg_error(op_, a.name,
                      "is on " + a.view->where() + " but '" + std::string(first->name) + "' is on " +
                          first->view->where() + " (all tensors of a call share one device)");
  }
  const bool cuda_memory = first != nullptr && first->view->memory == Memory::cuda;
  if (!backend_.empty()) {
    try {
      device_ = &cached_device(backend_);
    } catch (const ArgError&) {
      throw;
    } catch (const Error& e) {
      throw_arg_error(op_, "backend", e.what());
    }
  } else {
    device_ = cuda_memory ? &cuda_device(first->view->device_id) : &host_device();
  }
  for (Arg& a : args_)
    if (a.view) narrow(a);
  if (!cuda_memory && device_->host_accessible()) {
    wrap(*device_);
  } else if (cuda_memory) {
    if (!backend_.empty() && cuda_ordinal(*device_) != first->view->device_id)
      throw_arg_error(op_, first->name,
                      "is on " + first->view->where() + ", which " + device_->name() +
                          " cannot read: move the tensors (.cpu(), .to(...)) or pick backend=\"" +
                          first->view->where() + "\"");
    wrap(*device_);
    device_->use_native_stream(native_stream(stream_));
    native_stream_ = true;
  } else {
    stage(*device_);
  }
  return *device_;
}

void Call::wrap(hal::Device& device) {
  uintptr_t lo = std::numeric_limits<uintptr_t>::max(), hi = 0;
  for (const Arg& a : args_) {
    if (!a.view || a.view->numel() == 0) continue;
    const auto p = reinterpret_cast<uintptr_t>(host_data(a));
    const size_t n = static_cast<size_t>(a.view->numel()) * hal::dtype_size(a.view->dtype);
    lo = std::min(lo, p);
    hi = std::max(hi, p + n);
  }
  if (hi == 0) lo = hi = 0;
  const uintptr_t base = lo & ~(kBaseAlign - 1);
  // One buffer spans every tensor of the call, so the op's aliasing checks (which
  // compare buffers and offsets) see overlapping arguments.
  buffers_.push_back(device.wrap_memory(reinterpret_cast<void*>(base), hi - base));
  hal::Buffer* buffer = buffers_.back().get();
  tensors_.reserve(args_.size());
  for (const Arg& a : args_) {
    if (!a.view) {
      tensors_.emplace_back();
      continue;
    }
    const size_t offset = a.view->numel() == 0 ? 0 : reinterpret_cast<uintptr_t>(host_data(a)) - base;
    tensors_.push_back(make_tensor(buffer, offset, *a.view));
  }
}

void Call::stage(hal::Device& device) {
  staged_ = true;
  tensors_.resize(args_.size());
  for (size_t i = 0; i < args_.size(); ++i) {
    const Arg& a = args_[i];
    if (!a.view) continue;
    const auto p = reinterpret_cast<uintptr_t>(host_data(a));
    const size_t n = static_cast<size_t>(a.view->numel()) * hal::dtype_size(a.view->dtype);
    // The same host range is one device buffer (rope's y = x); other overlaps with an
    // output are refused, as the op refuses them for memory it addresses.
    bool shared = false;
    for (size_t j = 0; j < i && !shared; ++j) {
      const Arg& b = args_[j];
      if (!b.view || n == 0 || b.view->numel() == 0) continue;
      const auto q = reinterpret_cast<uintptr_t>(host_data(b));
      const size_t m = static_cast<size_t>(b.view->numel()) * hal::dtype_size(b.view->dtype);
      if (p == q && n == m && a.view->dtype == b.view->dtype) {
        tensors_[i] = tensors_[j];
        tensors_[i].rank = a.view->rank;
        tensors_[i].shape = make_tensor(nullptr, 0, *a.view).shape;
        shared = true;
      } else if (p < q + m && q < p + n && (a.role != Role::in || b.role != Role::in)) {
        throw_arg_error(op_, a.name, "overlaps '" + std::string(b.name) + "' (outputs must not alias inputs)");
      }
    }
    if (shared) continue;
    buffers_.push_back(device.alloc(n));
    tensors_[i] = make_tensor(buffers_.back().get(), 0, *a.view);
    if (a.role != Role::out) device.stream().upload(tensors_[i], host_data(a));
  }
}

void Call::finish() {
  if (!staged_) return;
  for (size_t i = 0; i < args_.size(); ++i) {
    const Arg& a = args_[i];
    if (a.view && a.role != Role::in) device_->stream().download(a.view->data, tensors_[i]);
  }
  device_->stream().synchronize();
}

}  // namespace msa::python
