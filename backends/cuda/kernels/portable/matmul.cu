// matmul: y = x W^T (+ bias), x [M][K], w [N][K]. The portable kernel (also the HIP
// path) is a plain shared-memory tiled FMA product in f32 (no TF32): 64x64 tiles, 256
// threads with 4x4 outputs each. CUDA's native tier runs cuBLAS instead where
// choose_matmul picks it (kernels/matmul/).
#include "backends/cuda/kernels/portable/entries.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

constexpr int kTile = 64, kTk = 16;

template <int DT>
__global__ void __launch_bounds__(256)
    matmul_kernel(const typename Elem<DT>::T* __restrict__ x, const typename Elem<DT>::T* __restrict__ w,
                  const typename Elem<DT>::T* __restrict__ bias, typename Elem<DT>::T* __restrict__ y, int64_t M,
                  int64_t N, int64_t K) {
  __shared__ float xs[kTk][kTile + 4];
  __shared__ float ws[kTk][kTile + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = int64_t{blockIdx.y} * kTile, n0 = int64_t{blockIdx.x} * kTile;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kTk) {
    // 64 rows x 16 k of x and of w: 1024 elements each, 4 per thread.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = threadIdx.x + i * 256;
      const int r = e / kTk, kk = e % kTk;
      const int64_t gm = m0 + r, gn = n0 + r, gk = k0 + kk;
      xs[kk][r] = (gm < M && gk < K) ? Elem<DT>::load(x[gm * K + gk]) : 0.0f;
      ws[kk][r] = (gn < N && gk < K) ? Elem<DT>::load(w[gn * K + gk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTk; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = xs[kk][ty + 16 * i];
        b[i] = ws[kk][tx + 16 * i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t gm = m0 + ty + 16 * i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gn = n0 + tx + 16 * j;
      if (gn >= N) continue;
      float v = acc[i][j];
      if (bias != nullptr) v += Elem<DT>::load(bias[gn]);
      y[gm * N + gn] = Elem<DT>::store(v);
    }
  }
}

}  // namespace

void matmul_portable(hal::Stream& s, const ops::MatmulArgs& a) {
  const int64_t M = a.x.dim(0), K = a.x.dim(1), N = a.w.dim(0);
  if (M == 0 || N == 0) return;
  auto& st = gpu_stream(s);
  const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile));
  MSA_DISPATCH_ACT(a.x.dtype, DT, {
    using T = typename Elem<DT>::T;
    matmul_kernel<DT><<<grid, 256, 0, st.native()>>>(
        a.x.data<T>(), a.w.data<T>(), a.bias.present() ? a.bias.data<T>() : nullptr, a.y.data<T>(), M, N, K);
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
