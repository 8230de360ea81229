#include "backends/vulkan/event.h"

#include "hal/error.h"

namespace msa::vulkan {

VulkanEvent::VulkanEvent(const Context& ctx) : ctx_(ctx) {
  if (ctx.caps.timestamp_bits == 0)
    throw Error("vulkan: " + ctx.caps.name + " has no timestamps on its compute queue; events cannot time work");
  VkQueryPoolCreateInfo ci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  ci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  ci.queryCount = 1;
  check(vkCreateQueryPool(ctx.device, &ci, nullptr, &pool_), "vkCreateQueryPool");
}

VulkanEvent::~VulkanEvent() { vkDestroyQueryPool(ctx_.device, pool_, nullptr); }

uint64_t VulkanEvent::ticks() const {
  if (!recorded_) throw Error("vulkan: event was never recorded on a stream");
  uint64_t v = 0;
  const VkResult r = vkGetQueryPoolResults(ctx_.device, pool_, 0, 1, sizeof(v), &v, sizeof(v), VK_QUERY_RESULT_64_BIT);
  if (r == VK_NOT_READY) throw Error("vulkan: event has not completed (synchronize the stream first)");
  check(r, "vkGetQueryPoolResults");
  const uint32_t bits = ctx_.caps.timestamp_bits;
  return bits >= 64 ? v : (v & ((uint64_t{1} << bits) - 1));
}

double VulkanEvent::elapsed_ms(const hal::Event& start) const {
  const auto* s = dynamic_cast<const VulkanEvent*>(&start);
  if (s == nullptr) throw Error("vulkan: elapsed_ms: start event is not a Vulkan event");
  const uint64_t t0 = s->ticks(), t1 = ticks();
  const double dt = t1 >= t0 ? static_cast<double>(t1 - t0) : -static_cast<double>(t0 - t1);
  return dt * ctx_.caps.timestamp_ns * 1e-6;
}

}  // namespace msa::vulkan
