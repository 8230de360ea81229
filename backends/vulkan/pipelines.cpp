#include "backends/vulkan/pipelines.h"

#include <vector>

#include "backends/vulkan/spirv.h"
#include "hal/error.h"

namespace msa::vulkan {

PipelineCache::~PipelineCache() {
  for (auto& [key, p] : cache_) {
    vkDestroyPipeline(ctx_.device, p.pipeline, nullptr);
    vkDestroyPipelineLayout(ctx_.device, p.layout, nullptr);
    vkDestroyDescriptorSetLayout(ctx_.device, p.set_layout, nullptr);
  }
}

const Pipeline& PipelineCache::get(std::string_view shader, uint32_t err_slot, uint32_t bindings, uint32_t push_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = std::string(shader) + "#" + std::to_string(err_slot);
  if (auto it = cache_.find(key); it != cache_.end()) {
    if (it->second.bindings != bindings || it->second.push_bytes != push_bytes)
      throw Error("vulkan: shader '" + std::string(shader) + "' used with inconsistent bindings");
    return it->second;
  }
  const SpirvBlob* blob = find_spirv(shader);
  if (blob == nullptr) throw Error("vulkan: shader '" + std::string(shader) + "' is not built into msa");

  Pipeline p;
  p.bindings = bindings;
  p.push_bytes = push_bytes;
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = bindings;
  dl.pBindings = b.data();
  check(vkCreateDescriptorSetLayout(ctx_.device, &dl, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");

  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &p.set_layout;
  pl.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
  pl.pPushConstantRanges = &range;
  check(vkCreatePipelineLayout(ctx_.device, &pl, nullptr, &p.layout), "vkCreatePipelineLayout");

  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = blob->size;
  sm.pCode = reinterpret_cast<const uint32_t*>(blob->data);
  VkShaderModule module = VK_NULL_HANDLE;
  check(vkCreateShaderModule(ctx_.device, &sm, nullptr, &module), "vkCreateShaderModule");

  VkSpecializationMapEntry entry{0, 0, sizeof(uint32_t)};
  VkSpecializationInfo spec{1, &entry, sizeof(uint32_t), &err_slot};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &spec;
  ci.layout = p.layout;
  const VkResult r = vkCreateComputePipelines(ctx_.device, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline);
  vkDestroyShaderModule(ctx_.device, module, nullptr);
  if (r != VK_SUCCESS) {
    vkDestroyPipelineLayout(ctx_.device, p.layout, nullptr);
    vkDestroyDescriptorSetLayout(ctx_.device, p.set_layout, nullptr);
    throw Error("vulkan: creating the pipeline of shader '" + std::string(shader) + "' failed: " + result_name(r));
  }
  return cache_.emplace(key, p).first->second;
}

}  // namespace msa::vulkan
