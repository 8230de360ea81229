// The Vulkan compute backend ("vulkan:N"): GLSL compute shaders compiled to SPIR-V at
// build time and embedded, run through a minimal runtime (loader, context, memory,
// stream, pipeline cache). Runs on any Vulkan 1.2 device with subgroup arithmetic,
// including Mesa's lavapipe on the CPU.
#pragma once
#include <memory>

#include "hal/device.h"
#include "hal/kernel_table.h"
#include "hal/registry.h"

namespace msa::vulkan {

// Every Vulkan physical device ("vulkan:N" in enumeration order) with its description,
// or why there is none (no loader, no driver, no usable device).
hal::BackendStatus probe();
// Opens vulkan:index; throws msa::Error naming the device and why it cannot be opened.
std::unique_ptr<hal::Device> open_device(int index);
// The Vulkan kernels.
hal::KernelTable make_kernel_table();

}  // namespace msa::vulkan
