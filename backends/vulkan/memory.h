// Vulkan memory: one VkBuffer bound to its own VkDeviceMemory per allocation (simple and
// adequate for msa's few, large tensors; a sub-allocator can replace this later).
// Device-local allocations hold tensors; host-visible, coherent, persistently mapped
// ones are staging buffers for upload/download and the device error flags.
#pragma once
#include <cstddef>
#include <cstdint>

#include "backends/vulkan/context.h"

namespace msa::vulkan {

// What hal::Buffer::handle() points to for a Vulkan buffer.
struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint64_t size = 0;       // bytes of the VkBuffer: the request rounded up to 16 (min 16)
  void* mapped = nullptr;  // host address (host-visible allocations only)
  uint64_t address = 0;    // buffer device address (device-local, where caps.buffer_address)
};

enum class MemoryKind { device_local, host_staging };

// Creates a buffer usable as storage buffer and transfer source/destination (device-local
// ones also through their device address where the context enabled it). Throws
// msa::Error (naming the size) when it cannot be allocated.
Allocation* create_allocation(const Context& ctx, uint64_t bytes, MemoryKind kind);
// Frees it (null allowed). The caller guarantees the GPU no longer uses it.
void destroy_allocation(const Context& ctx, Allocation* a);

}  // namespace msa::vulkan
