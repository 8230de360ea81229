// Compute pipelines, created once per (shader variant, error slot) and cached for the
// device's lifetime. Every pipeline has one descriptor set: binding 0 is the device
// error-flag buffer, bindings 1..n the op's tensors, all storage buffers; push
// constants carry the op's scalars and element offsets (push_constants.h).
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "backends/vulkan/context.h"

namespace msa::vulkan {

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;    // storage buffers, including the error flags at binding 0
  uint32_t push_bytes = 0;  // size of the push-constant struct
};

class PipelineCache {
 public:
  explicit PipelineCache(const Context& ctx) : ctx_(ctx) {}
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  // The pipeline of embedded shader `shader` whose error flags go to word `err_slot`
  // (specialization constant 0). Created on first use; throws msa::Error if the shader
  // is not embedded or the driver rejects it.
  const Pipeline& get(std::string_view shader, uint32_t err_slot, uint32_t bindings, uint32_t push_bytes);

 private:
  const Context& ctx_;
  std::mutex mu_;
  std::unordered_map<std::string, Pipeline> cache_;
};

}  // namespace msa::vulkan
