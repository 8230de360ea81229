// hal::Stream for Vulkan. Work is recorded into a command buffer ("batch") and submitted
// with a fence when the host needs a result (download, synchronize) or when a batch
// grows long; a full compute/transfer memory barrier precedes every command, so ops run
// in call order. Staging and temporary buffers live until their batch completes.
// synchronize() waits for every batch and raises the device error flags.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "backends/vulkan/memory.h"
#include "hal/stream.h"

namespace msa::vulkan {

class VulkanDevice;

class VulkanStream : public hal::Stream {
 public:
  explicit VulkanStream(VulkanDevice& dev);
  ~VulkanStream() override;

  void upload(const hal::Tensor& dst, const void* src) override;
  void download(void* dst, const hal::Tensor& src) override;
  void copy(const hal::Tensor& dst, const hal::Tensor& src) override;
  void fill_bytes(const hal::Tensor& dst, uint8_t byte) override;
  void record(hal::Event& event) override;
  void synchronize() override;

  VulkanDevice& device() { return dev_; }
  // Dispatches of the copy shader so far (copy() of large aligned ranges), for tests.
  uint64_t shader_copy_dispatches() const { return shader_copy_dispatches_; }
  // Tensors handed to kernels by device address so far (Launch::bind_address), for tests.
  uint64_t address_binds() const { return address_binds_; }
  void count_address_bind() { ++address_binds_; }

  // --- for kernels and events -------------------------------------------------------
  // The open command buffer with a barrier against all earlier work already recorded;
  // record exactly one command (or a reset+timestamp pair), then call end_command().
  VkCommandBuffer begin_command();
  void end_command();
  // A descriptor set of `layout` that stays valid until the current batch completes.
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout, uint32_t bindings);
  // A host-visible buffer holding a copy of `bytes` bytes of `data`, readable by shaders,
  // freed when the current batch completes.
  Allocation* temp_upload(const void* data, size_t bytes);
  // Frees `a` once the work recorded so far no longer uses it.
  void defer_free(Allocation* a);

 private:
  struct Batch;
  Batch& open_batch();
  void flush();     // submits the open batch (if it has commands)
  void wait_all();  // waits for and recycles every submitted batch
  void recycle(Batch& b);
  void check_errors();
  void shader_copy(Allocation* dst, uint64_t dst_off, Allocation* src, uint64_t src_off, uint64_t n);

  VulkanDevice& dev_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Batch> open_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<std::unique_ptr<Batch>> free_;
  uint64_t shader_copy_dispatches_ = 0;
  uint64_t address_binds_ = 0;
};

}  // namespace msa::vulkan
