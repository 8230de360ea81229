// rope: neox-style rotary embedding of the first rotary_dim dims of every head (in place
// allowed). Angles and their sine/cosine are computed in f64: positions reach 1e6 and an
// f32 angle would be off by ~0.06 rad there.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

template <int DT>
__global__ void rope_kernel(const typename Elem<DT>::T* x, const int32_t* __restrict__ pos, typename Elem<DT>::T* y,
                            int64_t T, int H, int D, int rd, double log_theta) {
  const int half = rd / 2;
  const int64_t n = T * H * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int j = static_cast<int>(i % half);
    const int64_t th = i / half;  // t * H + h
    const int64_t t = th / H;
    const double inv_freq = exp(-2.0 * j / rd * log_theta);
    double sn, cs;
    sincos(static_cast<double>(pos[t]) * inv_freq, &sn, &cs);
    const int64_t base = th * D;
    const float x1 = Elem<DT>::load(x[base + j]), x2 = Elem<DT>::load(x[base + j + half]);
    const float c = static_cast<float>(cs), s = static_cast<float>(sn);
    y[base + j] = Elem<DT>::store(x1 * c - x2 * s);
    y[base + j + half] = Elem<DT>::store(x2 * c + x1 * s);
  }
  if (x != y) {  // pass-through dims
    const int rest = D - rd;
    const int64_t m = T * H * rest;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m; i += int64_t{gridDim.x} * blockDim.x) {
      const int64_t th = i / rest;
      const int64_t e = th * D + rd + i % rest;
      y[e] = x[e];
    }
  }
}

}  // namespace

void rope(hal::Stream& s, const ops::RopeArgs& a) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), D = a.x.dim(2);
  const int rd = a.rotary_dim == 0 ? static_cast<int>(D) : a.rotary_dim;
  if (T * H == 0) return;
  auto& st = gpu_stream(s);
  MSA_DISPATCH_ACT(a.x.dtype, DT, {
    using T_ = typename Elem<DT>::T;
    rope_kernel<DT><<<grid_for(T * H * std::max<int64_t>(rd / 2, D - rd), 256, st.props()), 256, 0, st.native()>>>(
        a.x.data<T_>(), a.pos.data<int32_t>(), a.y.data<T_>(), T, static_cast<int>(H), static_cast<int>(D), rd,
        std::log(static_cast<double>(a.theta)));
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
