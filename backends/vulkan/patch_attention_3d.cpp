// patch_attention_3d: one workgroup per (token, head) over its window
// (shaders/patch_attention_3d.comp).
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/paged_attention.h"

namespace msa::vulkan {

void patch_attention_3d(hal::Stream& s, const ops::PatchAttention3dArgs& a) {
  const char* name = "patch_attention_3d";
  PatchAttentionPC pc{};
  Launch l(s, "patch_attention_3d_" + tag(a.q.dtype), hal::OpId::patch_attention_3d);
  pc.off_q = l.bind(a.q, "q");
  pc.off_k = l.bind(a.k, "k");
  pc.off_v = l.bind(a.v, "v");
  pc.off_items = l.bind(a.items, "items");
  pc.off_out = l.bind(a.out, "out");
  pc.off_lse = l.bind(a.lse, "lse");
  pc.N = u32(a.q.dim(0), name, "q");
  pc.H = u32(a.q.dim(1), name, "q");
  pc.D = u32(a.q.dim(2), name, "q");
  pc.n_items = a.items.present() ? u32(a.items.dim(0), name, "items") : 0;
  pc.window = u32(a.window, name, "window");
  pc.scale = a.scale;
  l.run(pc, uint64_t{pc.N} * pc.H);
}

std::string supports_patch_attention_3d(const ops::PatchAttention3dArgs& a) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (std::string why = check_head_dim(a.q.dim(2)); !why.empty()) return why;
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "N * H >= 2^32";
  return check_bindable(dev, {&a.q, &a.k, &a.v, &a.items, &a.out, &a.lse});
}

}  // namespace msa::vulkan
