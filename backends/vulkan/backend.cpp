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
  t.set(OpId::indexer_score, &indexer_score);
  t.set_supports(OpId::indexer_score, &supports_indexer_score);
  t.set(OpId::block_topk, &block_topk);
  t.set_supports(OpId::block_topk, &supports_block_topk);
  t.set(OpId::sparse_block_attention, &sparse_block_attention);
  t.set_supports(OpId::sparse_block_attention, &supports_sparse_block_attention);
  t.set(OpId::dense_attention, &dense_attention);
  t.set_supports(OpId::dense_attention, &supports_dense_attention);
  t.set(OpId::patch_attention_3d, &patch_attention_3d);
  t.set_supports(OpId::patch_attention_3d, &supports_patch_attention_3d);
  t.set(OpId::kv_append, &kv_append);
  t.set_supports(OpId::kv_append, &supports_kv_append);
  t.set(OpId::matmul, &matmul);
  t.set_supports(OpId::matmul, &supports_matmul);
  t.set(OpId::rms_norm, &rms_norm);
  t.set_supports(OpId::rms_norm, &supports_rms_norm);
  t.set(OpId::layer_norm, &layer_norm);
  t.set_supports(OpId::layer_norm, &supports_layer_norm);
  t.set(OpId::rope, &rope);
  t.set_supports(OpId::rope, &supports_rope);
  t.set(OpId::rope_3d, &rope_3d);
  t.set_supports(OpId::rope_3d, &supports_rope_3d);
  t.set(OpId::swiglu, &swiglu);
  t.set_supports(OpId::swiglu, &supports_swiglu);
  t.set(OpId::gelu, &gelu);
  t.set_supports(OpId::gelu, &supports_gelu);
  t.set(OpId::add, &add);
  t.set_supports(OpId::add, &supports_add);
  t.set(OpId::embedding, &embedding);
  t.set_supports(OpId::embedding, &supports_embedding);
  t.set(OpId::scatter_visual, &scatter_visual);
  t.set_supports(OpId::scatter_visual, &supports_scatter_visual);
  t.set(OpId::argmax, &argmax);
  t.set_supports(OpId::argmax, &supports_argmax);
  t.set(OpId::sparse_block_attention_backward, &sparse_block_attention_backward);
  t.set_supports(OpId::sparse_block_attention_backward, &supports_sparse_block_attention_backward);
  t.set(OpId::dense_attention_backward, &dense_attention_backward);
  t.set_supports(OpId::dense_attention_backward, &supports_dense_attention_backward);
  t.set(OpId::patch_attention_3d_backward, &patch_attention_3d_backward);
  t.set_supports(OpId::patch_attention_3d_backward, &supports_patch_attention_3d_backward);
  t.set(OpId::indexer_kl, &indexer_kl);
  t.set_supports(OpId::indexer_kl, &supports_indexer_kl);
  return t;
}

}  // namespace msa::vulkan
