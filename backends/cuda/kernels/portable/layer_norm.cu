// layer_norm over the last dim, one block per row, two passes in f32 with the biased
// (1/N) variance: y = (x - mean) * rsqrt(var + eps) * w + b.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

template <int DT>
__global__ void layer_norm_kernel(const typename Elem<DT>::T* __restrict__ x, const void* __restrict__ w,
                                  const void* __restrict__ b, int wdt, typename Elem<DT>::T* __restrict__ y, int64_t N,
                                  float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const auto* xr = x + row * N;
  auto* yr = y + row * N;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) sum += Elem<DT>::load(xr[i]);
  const float mean = block_sum(sum, scratch) / static_cast<float>(N);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const float d = Elem<DT>::load(xr[i]) - mean;
    var = fmaf(d, d, var);
  }
  var = block_sum(var, scratch) / static_cast<float>(N);
  const float inv = 1.0f / sqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    float v = (Elem<DT>::load(xr[i]) - mean) * inv * load_any(w, wdt, i);
    if (b != nullptr) v += load_any(b, wdt, i);
    yr[i] = Elem<DT>::store(v);
  }
}

}  // namespace

void layer_norm(hal::Stream& s, const ops::LayerNormArgs& a) {
  const int64_t N = last_dim(a.x), M = leading_rows(a.x);
  if (M == 0 || N == 0) return;
  auto& st = gpu_stream(s);
  const int threads = N >= 1024 ? 256 : 128;
  MSA_DISPATCH_ACT(a.x.dtype, DT, {
    using T = typename Elem<DT>::T;
    layer_norm_kernel<DT><<<static_cast<unsigned>(M), threads, 0, st.native()>>>(
        a.x.data<T>(), a.w.data<void>(), a.b.present() ? a.b.data<void>() : nullptr, dt_code(a.w.dtype), a.y.data<T>(),
        N, a.eps);
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
