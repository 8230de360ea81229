#include "hal/host_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include <unistd.h>

#include "hal/error.h"

namespace msa::hal {
namespace {

constexpr size_t kAlign = 64;

class HostEvent final : public Event {
 public:
  std::chrono::steady_clock::time_point t{};
  bool recorded = false;
  double elapsed_ms(const Event& start) const override {
    const auto* s = dynamic_cast<const HostEvent*>(&start);
    if (s == nullptr || !s->recorded || !recorded) throw Error("event: elapsed_ms needs two recorded host events");
    return std::chrono::duration<double, std::milli>(t - s->t).count();
  }
};

void check_host(const Tensor& t, const char* what) {
  if (!t.present()) throw Error(std::string("stream: ") + what + " tensor is absent");
  if (t.offset + t.nbytes() > t.buffer->bytes())
    throw Error(std::string("stream: ") + what + " tensor " + t.str() + " extends past its buffer");
}

class HostStream final : public Stream {
 public:
  void upload(const Tensor& dst, const void* src) override {
    check_host(dst, "upload destination");
    if (dst.nbytes() > 0) std::memcpy(dst.data<char>(), src, dst.nbytes());
  }
  void download(void* dst, const Tensor& src) override {
    check_host(src, "download source");
    if (src.nbytes() > 0) std::memcpy(dst, src.data<char>(), src.nbytes());
  }
  void copy(const Tensor& dst, const Tensor& src) override {
    check_host(dst, "copy destination");
    check_host(src, "copy source");
    if (check_copy("stream", dst, src)) std::memcpy(dst.data<char>(), src.data<char>(), dst.nbytes());
  }
  void fill_bytes(const Tensor& dst, uint8_t byte) override {
    check_host(dst, "fill");
    if (dst.nbytes() > 0) std::memset(dst.data<char>(), byte, dst.nbytes());
  }
  void record(Event& event) override {
    auto* e = dynamic_cast<HostEvent*>(&event);
    if (e == nullptr) throw Error("stream record: event from another backend");
    e->t = std::chrono::steady_clock::now();
    e->recorded = true;
  }
  void synchronize() override {}  // host kernels run synchronously and throw at once
};

void release_host(Device&, void* handle, size_t) { ::operator delete(handle, std::align_val_t(kAlign)); }

}  // namespace

HostDevice::HostDevice(std::string name, std::string backend, KernelTable table, int threads)
    : name_(std::move(name)),
      backend_(std::move(backend)),
      table_(std::move(table)),
      threads_(threads),
      stream_(std::make_unique<HostStream>()) {}

HostDevice::~HostDevice() = default;

DeviceInfo HostDevice::info() const {
  DeviceInfo i;
  i.backend = backend_;
  i.model = "host CPU";
  i.compute_units = threads_;
  i.details = std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
  return i;
}

size_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

BufferPtr HostDevice::alloc(size_t bytes) {
  // Refuse what cannot fit before asking the allocator: the padding below must not wrap,
  // and sanitizer allocators abort on absurd sizes instead of throwing bad_alloc.
  const size_t host = host_memory_bytes();
  if (host > 0 && bytes >= host)
    throw Error(name_ + ": cannot allocate " + std::to_string(bytes) + " bytes: more than the host's " +
                std::to_string(host) + " bytes of memory");
  // Round up so vector kernels may load whole 64-byte lines at the end of a tensor.
  const size_t padded = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
  void* p = nullptr;
  try {
    p = ::operator new(padded, std::align_val_t(kAlign));
  } catch (const std::bad_alloc&) {
    throw Error(name_ + ": cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  }
  return std::make_unique<Buffer>(*this, p, bytes, &release_host);
}

Stream& HostDevice::stream() { return *stream_; }

std::unique_ptr<Event> HostDevice::create_event() { return std::make_unique<HostEvent>(); }

}  // namespace msa::hal
