// The Vulkan entry points msa uses, loaded at run time from the loader library
// (libvulkan.so.1 / vulkan-1.dll) so that a build with Vulkan still runs, and reports a
// clean reason, on a machine without a Vulkan loader or driver. Every function is
// fetched through vkGetInstanceProcAddr, whose device-level trampolines dispatch to the
// right driver for any device of the instance.
#pragma once
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace msa::vulkan {

#define MSA_VK_GLOBAL_FNS(X)            \
  X(vkCreateInstance)                   \
  X(vkEnumerateInstanceVersion)         \
  X(vkEnumerateInstanceLayerProperties) \
  X(vkEnumerateInstanceExtensionProperties)

#define MSA_VK_INSTANCE_FNS(X)                \
  X(vkDestroyInstance)                        \
  X(vkEnumeratePhysicalDevices)               \
  X(vkGetPhysicalDeviceProperties)            \
  X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2)             \
  X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkEnumerateDeviceExtensionProperties)     \
  X(vkCreateDevice)                           \
  X(vkDestroyDevice)                          \
  X(vkGetDeviceQueue)                         \
  X(vkCreateBuffer)                           \
  X(vkDestroyBuffer)                          \
  X(vkGetBufferMemoryRequirements)            \
  X(vkGetBufferDeviceAddress)                 \
  X(vkAllocateMemory)                         \
  X(vkFreeMemory)                             \
  X(vkBindBufferMemory)                       \
  X(vkMapMemory)                              \
  X(vkUnmapMemory)                            \
  X(vkCreateCommandPool)                      \
  X(vkDestroyCommandPool)                     \
  X(vkAllocateCommandBuffers)                 \
  X(vkFreeCommandBuffers)                     \
  X(vkBeginCommandBuffer)                     \
  X(vkEndCommandBuffer)                       \
  X(vkResetCommandBuffer)                     \
  X(vkQueueSubmit)                            \
  X(vkQueueWaitIdle)                          \
  X(vkDeviceWaitIdle)                         \
  X(vkCreateFence)                            \
  X(vkDestroyFence)                           \
  X(vkWaitForFences)                          \
  X(vkResetFences)                            \
  X(vkCmdPipelineBarrier)                     \
  X(vkCmdCopyBuffer)                          \
  X(vkCmdFillBuffer)                          \
  X(vkCmdBindPipeline)                        \
  X(vkCmdBindDescriptorSets)                  \
  X(vkCmdPushConstants)                       \
  X(vkCmdDispatch)                            \
  X(vkCreateShaderModule)                     \
  X(vkDestroyShaderModule)                    \
  X(vkCreateDescriptorSetLayout)              \
  X(vkDestroyDescriptorSetLayout)             \
  X(vkCreatePipelineLayout)                   \
  X(vkDestroyPipelineLayout)                  \
  X(vkCreateComputePipelines)                 \
  X(vkDestroyPipeline)                        \
  X(vkCreateDescriptorPool)                   \
  X(vkDestroyDescriptorPool)                  \
  X(vkResetDescriptorPool)                    \
  X(vkAllocateDescriptorSets)                 \
  X(vkUpdateDescriptorSets)                   \
  X(vkCreateQueryPool)                        \
  X(vkDestroyQueryPool)                       \
  X(vkCmdResetQueryPool)                      \
  X(vkCmdWriteTimestamp)                      \
  X(vkGetQueryPoolResults)

#define MSA_VK_DECLARE(name) extern PFN_##name name;
MSA_VK_GLOBAL_FNS(MSA_VK_DECLARE)
MSA_VK_INSTANCE_FNS(MSA_VK_DECLARE)
#undef MSA_VK_DECLARE

// The process-wide instance, created on first use (never destroyed: drivers may keep
// threads alive, and hal devices can outlive any one owner). Throws msa::Error with the
// reason (no loader library, no driver, instance creation failed).
VkInstance instance();

// Throws msa::Error("vulkan: <what>: <VkResult name>") unless r is VK_SUCCESS.
void check(VkResult r, const char* what);
// "VK_ERROR_OUT_OF_DEVICE_MEMORY" etc.
std::string result_name(VkResult r);

}  // namespace msa::vulkan
