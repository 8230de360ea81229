// hal::Buffer: one owned allocation on one device (RAII). Created by Device::alloc and
// released by the device's allocator when destroyed. Not copyable; movable by pointer.
#pragma once
#include <cstddef>
#include <memory>

namespace msa::hal {

class Device;

class Buffer {
 public:
  // `handle` is the backend's native handle: a host pointer (CPU backends), a device
  // pointer (CUDA/HIP), or the backend's own object (Vulkan). `release` frees it.
  using Release = void (*)(Device& device, void* handle, size_t bytes);
  Buffer(Device& device, void* handle, size_t bytes, Release release)
      : device_(&device), handle_(handle), bytes_(bytes), release_(release) {}
  ~Buffer() {
    if (release_ != nullptr && handle_ != nullptr) release_(*device_, handle_, bytes_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // The device that owns this allocation.
  Device& device() const { return *device_; }
  // The backend's native handle (see constructor).
  void* handle() const { return handle_; }
  // Size in bytes as requested.
  size_t bytes() const { return bytes_; }

 private:
  Device* device_;
  void* handle_;
  size_t bytes_;
  Release release_;
};

using BufferPtr = std::unique_ptr<Buffer>;

}  // namespace msa::hal
