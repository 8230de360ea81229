// patch_attention_3d_backward (docs/training.md): one workgroup per (token, head) owns
// that row's dq, dk and dv, summing over the tokens of its window in order (attention is
// bidirectional inside a window, so no other workgroup writes them: deterministic, no
// atomics). Items are validated on the device as the forward does
// (shaders/patch_attention_3d_backward.comp, shaders/patch_items.glsl).
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void patch_attention_3d_backward(hal::Stream& s, const ops::PatchAttention3dBackwardArgs& a) {
  const char* name = "patch_attention_3d_backward";
  PatchBackwardPC pc{};
  Launch l(s, "patch_attention_3d_backward_" + tag(a.q.dtype), hal::OpId::patch_attention_3d_backward);
  pc.off_q = l.bind(a.q, "q");
  pc.off_k = l.bind(a.k, "k");
  pc.off_v = l.bind(a.v, "v");
  pc.off_items = l.bind(a.items, "items");
  pc.off_dout = l.bind(a.dout, "dout");
  pc.off_out = l.bind(a.out, "out");
  pc.off_lse = l.bind(a.lse, "lse");
  pc.off_dq = l.bind(a.dq, "dq");
  pc.off_dk = l.bind(a.dk, "dk");
  pc.off_dv = l.bind(a.dv, "dv");
  pc.N = u32(a.q.dim(0), name, "q");
  pc.H = u32(a.q.dim(1), name, "q");
  pc.D = u32(a.q.dim(2), name, "q");
  pc.n_items = a.items.present() ? u32(a.items.dim(0), name, "items") : 0;
  pc.window = u32(a.window, name, "window");
  pc.scale = a.scale;
  // At least one workgroup: workgroup 0 validates the items.
  l.run(pc, std::max<uint64_t>(uint64_t{pc.N} * pc.H, 1));
}

std::string supports_patch_attention_3d_backward(const ops::PatchAttention3dBackwardArgs& a) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (a.q.dim(2) > 256) return "head dim D = " + std::to_string(a.q.dim(2)) + " > 256";
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "N * H >= 2^32";
  return check_bindable(dev, {&a.dout, &a.q, &a.k, &a.v, &a.items, &a.out, &a.lse, &a.dq, &a.dk, &a.dv});
}

}  // namespace msa::vulkan
