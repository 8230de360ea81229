// rms_norm (plain and gemma): one workgroup per row (shaders/norm.comp, LAYER=0).
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/norm.h"

namespace msa::vulkan {

void rms_norm(hal::Stream& s, const ops::RmsNormArgs& a) {
  run_norm(s, "rms_norm", hal::OpId::rms_norm, a.x, a.w, hal::Tensor{}, a.y, a.eps,
           a.kind == ops::NormKind::gemma ? 1 : 0);
}

std::string supports_rms_norm(const ops::RmsNormArgs& a) { return supports_norm(a.x, a.w, hal::Tensor{}, a.y); }

}  // namespace msa::vulkan
