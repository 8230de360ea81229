// layer_norm: one workgroup per row (shaders/norm.comp, LAYER=1).
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/norm.h"

namespace msa::vulkan {

void layer_norm(hal::Stream& s, const ops::LayerNormArgs& a) {
  run_norm(s, "layer_norm", hal::OpId::layer_norm, a.x, a.w, a.b, a.y, a.eps, a.b.present() ? 1 : 0);
}

std::string supports_layer_norm(const ops::LayerNormArgs& a) { return supports_norm(a.x, a.w, a.b, a.y); }

}  // namespace msa::vulkan
