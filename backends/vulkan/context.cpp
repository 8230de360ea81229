#include "backends/vulkan/context.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "hal/env.h"
#include "hal/error.h"

namespace msa::vulkan {

std::string Caps::type_name() const {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

std::string Caps::describe() const {
  std::ostringstream s;
  s << name << " (" << type_name() << ", Vulkan " << VK_API_VERSION_MAJOR(api_version) << "."
    << VK_API_VERSION_MINOR(api_version) << ", " << (device_local_bytes >> 20) << " MiB, subgroup " << subgroup_size
    << ", max binding " << (max_storage_range >> 20) << " MiB" << (storage16 ? "" : ", no 16-bit storage")
    << (buffer_address ? "" : ", no buffer addresses") << ")";
  return s.str();
}

std::string Caps::unusable_reason() const {
  if (api_version < VK_API_VERSION_1_2) return "device supports only Vulkan < 1.2";
  if (queue_family == UINT32_MAX) return "no compute queue";
  if (!subgroup_ops) return "no subgroup basic/vote/arithmetic/ballot operations in compute shaders";
  if (max_push_constants < 128) return "fewer than 128 bytes of push constants";
  if (max_shared < 16384) return "less than 16 KiB of shared memory";
  return "";
}

std::vector<VkPhysicalDevice> physical_devices() {
  VkInstance inst = instance();
  uint32_t n = 0;
  check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> pds(n);
  if (n > 0) check(vkEnumeratePhysicalDevices(inst, &n, pds.data()), "vkEnumeratePhysicalDevices");
  pds.resize(n);
  return pds;
}

Caps query_caps(VkPhysicalDevice pd) {
  Caps c;
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  sg.pNext = &m3;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &sg;
  vkGetPhysicalDeviceProperties2(pd, &props);
  const VkPhysicalDeviceLimits& L = props.properties.limits;
  c.name = props.properties.deviceName;
  c.type = props.properties.deviceType;
  c.api_version = props.properties.apiVersion;
  c.driver_version = props.properties.driverVersion;
  c.subgroup_size = sg.subgroupSize;
  const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_VOTE_BIT |
                                      VK_SUBGROUP_FEATURE_ARITHMETIC_BIT | VK_SUBGROUP_FEATURE_BALLOT_BIT;
  c.subgroup_ops = (sg.supportedOperations & need) == need && (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  c.subgroup_shuffle = c.subgroup_ops && (sg.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) != 0;
  c.max_storage_range = L.maxStorageBufferRange;
  c.storage_align = L.minStorageBufferOffsetAlignment;
  c.max_allocation = m3.maxMemoryAllocationSize;
  c.max_shared = L.maxComputeSharedMemorySize;
  for (int i = 0; i < 3; ++i) c.max_groups[i] = L.maxComputeWorkGroupCount[i];
  c.max_push_constants = L.maxPushConstantsSize;
  c.timestamp_ns = L.timestampPeriod;

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &f11;
  // (The 1.2 feature struct only where the device reports 1.2: unusable below anyway.)
  if (c.api_version >= VK_API_VERSION_1_2) f11.pNext = &f12;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  c.storage16 = f11.storageBuffer16BitAccess == VK_TRUE;
  c.float64 = f.features.shaderFloat64 == VK_TRUE;
  c.buffer_address = f12.bufferDeviceAddress == VK_TRUE && f.features.shaderInt64 == VK_TRUE;

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
  // Prefer a compute family without graphics (a dedicated compute queue), else any.
  for (int pass = 0; pass < 2 && c.queue_family == UINT32_MAX; ++pass) {
    for (uint32_t i = 0; i < nq; ++i) {
      const bool compute = (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
      const bool graphics = (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0;
      if (compute && (pass == 1 || !graphics)) {
        c.queue_family = i;
        c.timestamp_bits = qf[i].timestampValidBits;
        break;
      }
    }
  }
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      c.device_local_bytes = std::max<uint64_t>(c.device_local_bytes, mem.memoryHeaps[i].size);
  return c;
}

Context::~Context() {
  if (device != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device);
    vkDestroyDevice(device, nullptr);
  }
}

std::unique_ptr<Context> create_context(int index) {
  const std::string name = "vulkan:" + std::to_string(index);
  const auto pds = physical_devices();
  if (index < 0 || index >= static_cast<int>(pds.size()))
    throw Error("device '" + name + "': only " + std::to_string(pds.size()) + " Vulkan device(s)");
  auto ctx = std::make_unique<Context>();
  ctx->physical = pds[static_cast<size_t>(index)];
  ctx->caps = query_caps(ctx->physical);
  if (const std::string why = ctx->caps.unusable_reason(); !why.empty())
    throw Error("device '" + name + "' (" + ctx->caps.name + "): " + why);
  vkGetPhysicalDeviceMemoryProperties(ctx->physical, &ctx->memory);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = ctx->caps.queue_family;
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;

  // MSA_VK_BDA=0: the device as before buffer device addresses (no address usage on
  // buffers; tensors past maxStorageBufferRange unsupported).
  if (parse_env_int("MSA_VK_BDA", std::getenv("MSA_VK_BDA"), 1, 0, 1) == 0) ctx->caps.buffer_address = false;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.bufferDeviceAddress = ctx->caps.buffer_address ? VK_TRUE : VK_FALSE;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.storageBuffer16BitAccess = ctx->caps.storage16 ? VK_TRUE : VK_FALSE;
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &f11;
  f.features.shaderFloat64 = ctx->caps.float64 ? VK_TRUE : VK_FALSE;
  f.features.shaderInt64 = ctx->caps.buffer_address ? VK_TRUE : VK_FALSE;

  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &f;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  VkResult r = vkCreateDevice(ctx->physical, &dci, nullptr, &ctx->device);
  if (r != VK_SUCCESS)
    throw Error("device '" + name + "' (" + ctx->caps.name + "): vkCreateDevice failed: " + result_name(r));
  vkGetDeviceQueue(ctx->device, ctx->caps.queue_family, 0, &ctx->queue);
  return ctx;
}

}  // namespace msa::vulkan
