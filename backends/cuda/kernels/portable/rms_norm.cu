// rms_norm over the last dim, one block per row, statistics in f32 (fixed-order
// reduction): y = x * rsqrt(mean(x^2) + eps) * w (plain) or * (1 + w) (gemma).
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

template <int DT>
__global__ void rms_norm_kernel(const typename Elem<DT>::T* __restrict__ x, const void* __restrict__ w, int wdt,
                                typename Elem<DT>::T* __restrict__ y, int64_t N, float eps, bool gemma) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const auto* xr = x + row * N;
  auto* yr = y + row * N;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const float v = Elem<DT>::load(xr[i]);
    ss = fmaf(v, v, ss);
  }
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(N) + eps);
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const float wv = load_any(w, wdt, i);
    yr[i] = Elem<DT>::store(Elem<DT>::load(xr[i]) * inv * (gemma ? 1.0f + wv : wv));
  }
}

}  // namespace

void rms_norm(hal::Stream& s, const ops::RmsNormArgs& a) {
  const int64_t N = last_dim(a.x), M = leading_rows(a.x);
  if (M == 0 || N == 0) return;
  auto& st = gpu_stream(s);
  const int threads = N >= 1024 ? 256 : 128;
  MSA_DISPATCH_ACT(a.x.dtype, DT, {
    using T = typename Elem<DT>::T;
    rms_norm_kernel<DT><<<static_cast<unsigned>(M), threads, 0, st.native()>>>(
        a.x.data<T>(), a.w.data<void>(), dt_code(a.w.dtype), a.y.data<T>(), N, a.eps, a.kind == ops::NormKind::gemma);
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
