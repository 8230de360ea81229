// A grid-stride elementwise kernel: y[i] = f(x0[i], x1[i]) in f32, rounded once to DT.
#pragma once
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {

template <int DT, typename F>
__global__ void binary_kernel(const typename Elem<DT>::T* __restrict__ a, const typename Elem<DT>::T* __restrict__ b,
                              typename Elem<DT>::T* __restrict__ y, int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = Elem<DT>::store(f(Elem<DT>::load(a[i]), b != nullptr ? Elem<DT>::load(b[i]) : 0.0f));
}

// Launches binary_kernel over every element of y (b may be absent for unary ops).
template <typename F>
void launch_binary(hal::Stream& s, const hal::Tensor& a, const hal::Tensor* b, const hal::Tensor& y, F f) {
  const int64_t n = y.numel();
  if (n == 0) return;
  auto& st = gpu_stream(s);
  constexpr int kThreads = 256;
  MSA_DISPATCH_ACT(y.dtype, DT, {
    using T = typename Elem<DT>::T;
    binary_kernel<DT><<<grid_for(n, kThreads, st.props()), kThreads, 0, st.native()>>>(
        a.data<T>(), b != nullptr ? b->data<T>() : nullptr, y.data<T>(), n, f);
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
