#include "backends/vulkan/backend.h"

#include "backends/vulkan/context.h"
#include "backends/vulkan/device.h"
#include "backends/vulkan/kernels.h"
#include "hal/error.h"

namespace msa::vulkan {

hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "vulkan";
  s.compiled = true;
  try {
    const auto pds = physical_devices();
    std::string unusable;
    for (size_t i = 0; i < pds.size(); ++i) {
      const Caps c = query_caps(pds[i]);
      const std::string why = c.unusable_reason();
      if (!why.empty()) {
        // Device indices follow the enumeration, so an unusable device keeps its number
        // but is not offered.
        unusable += (unusable.empty() ? "" : "; ") + c.name + ": " + why;
        continue;
      }
      s.devices.push_back("vulkan:" + std::to_string(i));
      s.descriptions.push_back(c.describe());
      s.cpu_emulated.push_back(c.type == VK_PHYSICAL_DEVICE_TYPE_CPU);
    }
    if (s.devices.empty())
      s.unavailable_reason =
          pds.empty() ? "no Vulkan physical device found" : "no usable Vulkan device (" + unusable + ")";
  } catch (const std::exception& e) {
    s.unavailable_reason = e.what();
  }
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) { return std::make_unique<VulkanDevice>(index); }

hal::KernelTable make_kernel_table() {
  using hal::OpId;
  hal::KernelTable t;
#define MSA_SET_KERNEL(name, Args)     \
  t.set<ops::Args>(OpId::name, &name); \
  t.set_supports<ops::Args>(OpId::name, &supports_##name);
  MSA_FOR_EACH_KERNEL_OP(MSA_SET_KERNEL)
#undef MSA_SET_KERNEL
  return t;
}

}  // namespace msa::vulkan
