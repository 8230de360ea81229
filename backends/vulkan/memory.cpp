#include "backends/vulkan/memory.h"

#include <algorithm>
#include <string>

#include "hal/error.h"

namespace msa::vulkan {
namespace {

// A memory type allowed by `bits` with all `want` flags, preferring `prefer` as well.
int find_memory_type(const VkPhysicalDeviceMemoryProperties& mem, uint32_t bits, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags prefer) {
  int fallback = -1;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
    if ((bits & (1u << i)) == 0) continue;
    const VkMemoryPropertyFlags f = mem.memoryTypes[i].propertyFlags;
    if ((f & want) != want) continue;
    if ((f & prefer) == prefer) return static_cast<int>(i);
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  return fallback;
}

}  // namespace

Allocation* create_allocation(const Context& ctx, uint64_t bytes, MemoryKind kind) {
  // Refuse what no heap can hold before the driver sees it (the size must not wrap when
  // rounded, and some drivers crash on absurd sizes instead of failing).
  uint64_t largest_heap = 0;
  for (uint32_t h = 0; h < ctx.memory.memoryHeapCount; ++h)
    largest_heap = std::max<uint64_t>(largest_heap, ctx.memory.memoryHeaps[h].size);
  if (bytes > largest_heap)
    throw Error("vulkan: cannot allocate " + std::to_string(bytes) + " bytes on " + ctx.caps.name +
                ": larger than its largest memory heap (" + std::to_string(largest_heap) + " bytes)");
  auto* a = new Allocation();
  a->size = bytes < 16 ? 16 : (bytes + 15) / 16 * 16;
  auto fail = [&](const std::string& why) {
    destroy_allocation(ctx, a);
    throw Error("vulkan: cannot allocate " + std::to_string(bytes) + " bytes of " +
                (kind == MemoryKind::device_local ? "device" : "staging") + " memory on " + ctx.caps.name + ": " + why);
  };
  const bool addressed = kind == MemoryKind::device_local && ctx.caps.buffer_address;
  VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bci.size = a->size;
  bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (addressed) bci.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(ctx.device, &bci, nullptr, &a->buffer);
  if (r != VK_SUCCESS) fail("vkCreateBuffer: " + result_name(r));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx.device, a->buffer, &req);
  int type = -1;
  if (kind == MemoryKind::device_local) {
    type = find_memory_type(ctx.memory, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    if (type < 0) type = find_memory_type(ctx.memory, req.memoryTypeBits, 0, 0);
  } else {
    type = find_memory_type(ctx.memory, req.memoryTypeBits,
                            VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                            VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  }
  if (type < 0) fail("no suitable memory type");
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.pNext = addressed ? &flags : nullptr;
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  r = vkAllocateMemory(ctx.device, &mai, nullptr, &a->memory);
  if (r != VK_SUCCESS)
    fail("vkAllocateMemory: " + result_name(r) +
         (req.size > ctx.caps.max_allocation && ctx.caps.max_allocation > 0
              ? " (above maxMemoryAllocationSize, " + std::to_string(ctx.caps.max_allocation) + " bytes)"
              : ""));
  r = vkBindBufferMemory(ctx.device, a->buffer, a->memory, 0);
  if (r != VK_SUCCESS) fail("vkBindBufferMemory: " + result_name(r));
  if (addressed) {
    VkBufferDeviceAddressInfo ai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    ai.buffer = a->buffer;
    a->address = vkGetBufferDeviceAddress(ctx.device, &ai);
    if (a->address == 0) fail("vkGetBufferDeviceAddress returned 0");
  }
  if (kind == MemoryKind::host_staging) {
    r = vkMapMemory(ctx.device, a->memory, 0, VK_WHOLE_SIZE, 0, &a->mapped);
    if (r != VK_SUCCESS) fail("vkMapMemory: " + result_name(r));
  }
  return a;
}

void destroy_allocation(const Context& ctx, Allocation* a) {
  if (a == nullptr) return;
  if (a->mapped != nullptr) vkUnmapMemory(ctx.device, a->memory);
  if (a->buffer != VK_NULL_HANDLE) vkDestroyBuffer(ctx.device, a->buffer, nullptr);
  if (a->memory != VK_NULL_HANDLE) vkFreeMemory(ctx.device, a->memory, nullptr);
  delete a;
}

}  // namespace msa::vulkan
