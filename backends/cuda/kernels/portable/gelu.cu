// gelu: exact (erf) form, y = 0.5 x (1 + erf(x / sqrt 2)), in f32.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/elementwise.cuh"

namespace msa::MSA_GPU_NS {
namespace {
struct GeluF {
  __device__ float operator()(float x, float) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
}  // namespace

void gelu(hal::Stream& s, const ops::GeluArgs& a) { launch_binary(s, a.x, nullptr, a.y, GeluF{}); }

}  // namespace msa::MSA_GPU_NS
