#include "backends/vulkan/device.h"

#include <algorithm>
#include <cstring>

#include "backends/vulkan/backend.h"
#include "backends/vulkan/event.h"
#include "backends/vulkan/stream.h"
#include "hal/error.h"
#include "hal/op_id.h"

namespace msa::vulkan {
namespace {

void release_buffer(hal::Device& d, void* handle, size_t) {
  static_cast<VulkanDevice&>(d).vk_stream().defer_free(static_cast<Allocation*>(handle));
}

}  // namespace

VulkanDevice::VulkanDevice(int index) : index_(index), ctx_(create_context(index)) {
  pipelines_ = std::make_unique<PipelineCache>(*ctx_);
  errors_ = create_allocation(*ctx_, sizeof(uint32_t) * hal::kOpCount, MemoryKind::host_staging);
  std::memset(errors_->mapped, 0, errors_->size);
  dummy_ = create_allocation(*ctx_, 16, MemoryKind::device_local);
  stream_ = std::make_unique<VulkanStream>(*this);
  table_ = make_kernel_table();
}

Allocation* VulkanDevice::workspace(uint64_t bytes) {
  if (workspace_ == nullptr || workspace_->size < bytes) {
    if (workspace_ != nullptr) stream_->defer_free(workspace_);
    workspace_ = nullptr;
    workspace_ = create_allocation(*ctx_, std::max<uint64_t>(bytes, uint64_t{1} << 20), MemoryKind::device_local);
  }
  return workspace_;
}

VulkanDevice::~VulkanDevice() {
  if (workspace_ != nullptr) stream_->defer_free(workspace_);
  stream_.reset();  // waits for the GPU and frees deferred buffers
  destroy_allocation(*ctx_, dummy_);
  destroy_allocation(*ctx_, errors_);
  pipelines_.reset();
}

hal::DeviceInfo VulkanDevice::info() const {
  hal::DeviceInfo i;
  const Caps& c = ctx_->caps;
  i.backend = "vulkan";
  i.model = c.name;
  i.memory_bytes = c.device_local_bytes;
  i.compute_units = 0;  // Vulkan does not expose a core count
  i.details = c.type_name() + ", Vulkan " + std::to_string(VK_API_VERSION_MAJOR(c.api_version)) + "." +
              std::to_string(VK_API_VERSION_MINOR(c.api_version)) + "." +
              std::to_string(VK_API_VERSION_PATCH(c.api_version)) + ", subgroup " + std::to_string(c.subgroup_size) +
              ", maxStorageBufferRange " + std::to_string(c.max_storage_range >> 20) + " MiB, shared " +
              std::to_string(c.max_shared >> 10) + " KiB" + (c.storage16 ? ", 16-bit storage" : "") +
              (c.float64 ? ", float64" : "");
  return i;
}

hal::BufferPtr VulkanDevice::alloc(size_t bytes) {
  Allocation* a = create_allocation(*ctx_, bytes, MemoryKind::device_local);
  return std::make_unique<hal::Buffer>(*this, a, bytes, &release_buffer);
}

hal::Stream& VulkanDevice::stream() { return *stream_; }

std::unique_ptr<hal::Event> VulkanDevice::create_event() { return std::make_unique<VulkanEvent>(*ctx_); }

VulkanDevice& device_of(const hal::Tensor& t, const char* what) {
  if (!t.present()) throw Error(std::string("vulkan: tensor '") + what + "' is absent");
  auto* d = dynamic_cast<VulkanDevice*>(&t.buffer->device());
  if (d == nullptr)
    throw Error(std::string("vulkan: tensor '") + what + "' lives on " + t.buffer->device().name() +
                ", not on a Vulkan device");
  return *d;
}

}  // namespace msa::vulkan
