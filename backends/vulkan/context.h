// One opened Vulkan device: physical device, logical device, its compute queue and the
// limits and features msa's kernels depend on. Created by create_context(), destroyed
// after everything allocated on it (VulkanDevice owns it and orders the teardown).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/vulkan/loader.h"

namespace msa::vulkan {

// What a physical device offers, as probe() and the kernels' supports() need it.
struct Caps {
  std::string name;  // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  uint32_t driver_version = 0;
  uint32_t subgroup_size = 0;      // queried, not assumed (8 on lavapipe, 32 on NVIDIA)
  bool subgroup_ops = false;       // basic + vote + arithmetic + ballot in compute
  bool subgroup_shuffle = false;   // shuffle (subgroupShuffleXor) in compute: the GQA kernels
  uint64_t max_storage_range = 0;  // maxStorageBufferRange: the largest tensor binding
  uint64_t storage_align = 0;      // minStorageBufferOffsetAlignment
  uint64_t max_allocation = 0;     // maxMemoryAllocationSize (a soft limit: NVIDIA allows more)
  uint32_t max_shared = 0;         // maxComputeSharedMemorySize
  uint32_t max_groups[3] = {0, 0, 0};
  uint32_t max_push_constants = 0;
  bool storage16 = false;  // storageBuffer16BitAccess: bf16/f16 tensors
  bool float64 = false;    // shaderFloat64: rope angles in double
  // bufferDeviceAddress and shaderInt64: kernels may read tensors larger than one binding
  // through their 64-bit addresses (the GQA sparse attention's K/V). create_context()
  // clears it when MSA_VK_BDA=0 (then such tensors are unsupported).
  bool buffer_address = false;
  double timestamp_ns = 0.0;    // timestampPeriod
  uint32_t timestamp_bits = 0;  // of the compute queue family (0: no timestamps)
  uint32_t queue_family = UINT32_MAX;
  uint64_t device_local_bytes = 0;  // largest device-local heap

  // "discrete GPU", "CPU" ...
  std::string type_name() const;
  // One line for `msa devices`.
  std::string describe() const;
  // "" when msa can run on this device, else why not.
  std::string unusable_reason() const;
};

// Every physical device of the instance, in enumeration order ("vulkan:N" is entry N).
std::vector<VkPhysicalDevice> physical_devices();
Caps query_caps(VkPhysicalDevice pd);

struct Context {
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  Caps caps;
  VkPhysicalDeviceMemoryProperties memory{};

  ~Context();
};

// Opens physical device `index` with one compute queue and the features of Caps enabled.
// Throws msa::Error naming "vulkan:<index>" and the reason.
std::unique_ptr<Context> create_context(int index);

}  // namespace msa::vulkan
