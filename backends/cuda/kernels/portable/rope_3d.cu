// rope_3d: a = 2 floor(D/6) dims per axis; frequency vector [t | h | w] of a/2 each with
// inv_freq_j = theta^(-2j/a), duplicated and rotated neox-style over the first 3a dims;
// the rest pass through. Angles in f64 (see rope.cu).
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

template <int DT>
__global__ void rope_3d_kernel(const typename Elem<DT>::T* x, const int32_t* __restrict__ pos, typename Elem<DT>::T* y,
                               int64_t N, int H, int D, double log_theta) {
  const int a = 2 * (D / 6), qa = a / 2, half = 3 * qa;
  const int64_t n = N * H * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int k = static_cast<int>(i % half);
    const int64_t nh = i / half;
    const int64_t p = nh / H;
    const int axis = k / qa, j = k % qa;
    const double inv_freq = exp(-2.0 * j / a * log_theta);
    double sn, cs;
    sincos(static_cast<double>(pos[p * 3 + axis]) * inv_freq, &sn, &cs);
    const int64_t base = nh * D;
    const float x1 = Elem<DT>::load(x[base + k]), x2 = Elem<DT>::load(x[base + k + half]);
    const float c = static_cast<float>(cs), s = static_cast<float>(sn);
    y[base + k] = Elem<DT>::store(x1 * c - x2 * s);
    y[base + k + half] = Elem<DT>::store(x2 * c + x1 * s);
  }
  if (x != y) {
    const int rest = D - 2 * half;
    const int64_t m = N * H * rest;
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m; i += int64_t{gridDim.x} * blockDim.x) {
      const int64_t e = (i / rest) * D + 2 * half + i % rest;
      y[e] = x[e];
    }
  }
}

}  // namespace

void rope_3d(hal::Stream& s, const ops::Rope3dArgs& a) {
  const int64_t N = a.x.dim(0), H = a.x.dim(1), D = a.x.dim(2);
  if (N * H == 0) return;
  auto& st = gpu_stream(s);
  MSA_DISPATCH_ACT(a.x.dtype, DT, {
    using T_ = typename Elem<DT>::T;
    rope_3d_kernel<DT><<<grid_for(N * H * std::max<int64_t>(3 * (D / 6), 8), 256, st.props()), 256, 0, st.native()>>>(
        a.x.data<T_>(), a.pos.data<int32_t>(), a.y.data<T_>(), N, static_cast<int>(H), static_cast<int>(D),
        std::log(static_cast<double>(a.theta)));
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
