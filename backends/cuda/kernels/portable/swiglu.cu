// swiglu: y = silu(gate) * up = gate / (1 + exp(-gate)) * up, in f32.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/elementwise.cuh"

namespace msa::MSA_GPU_NS {
namespace {
struct SwigluF {
  __device__ float operator()(float g, float u) const { return g / (1.0f + expf(-g)) * u; }
};
}  // namespace

void swiglu(hal::Stream& s, const ops::SwigluArgs& a) { launch_binary(s, a.gate, &a.up, a.y, SwigluF{}); }

}  // namespace msa::MSA_GPU_NS
