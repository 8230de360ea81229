// hal::Event for Vulkan: one timestamp query written at the event's point of the stream.
#pragma once
#include "backends/vulkan/context.h"
#include "hal/event.h"

namespace msa::vulkan {

class VulkanEvent : public hal::Event {
 public:
  explicit VulkanEvent(const Context& ctx);
  ~VulkanEvent() override;
  double elapsed_ms(const hal::Event& start) const override;

  VkQueryPool pool() const { return pool_; }
  void mark_recorded() { recorded_ = true; }

 private:
  // Ticks of the completed timestamp; throws msa::Error if not recorded or not done.
  uint64_t ticks() const;

  const Context& ctx_;
  VkQueryPool pool_ = VK_NULL_HANDLE;
  bool recorded_ = false;
};

}  // namespace msa::vulkan
