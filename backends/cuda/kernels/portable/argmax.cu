// argmax per row: ties go to the lowest index; NaN is never the max unless the whole row
// is NaN (then 0). One block per row.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

constexpr int kNone = 0x7fffffff;

__device__ __forceinline__ void take_better(float& bv, int& bi, float v, int i) {
  if (i == kNone) return;
  if (bi == kNone || v > bv || (v == bv && i < bi)) {
    bv = v;
    bi = i;
  }
}

template <int DT>
__global__ void argmax_kernel(const typename Elem<DT>::T* __restrict__ x, int32_t* __restrict__ idx, int64_t N) {
  __shared__ float sv[1024 / kWarp];
  __shared__ int si[1024 / kWarp];
  const auto* row = x + blockIdx.x * N;
  float bv = 0.0f;
  int bi = kNone;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const float v = Elem<DT>::load(row[i]);
    if (v == v) take_better(bv, bi, v, static_cast<int>(i));
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(MSA_FULL_MASK, bv, o, kWarp);
    const int oi = __shfl_xor_sync(MSA_FULL_MASK, bi, o, kWarp);
    take_better(bv, bi, ov, oi);
  }
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) {
    sv[warp] = bv;
    si[warp] = bi;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / kWarp); ++w) take_better(bv, bi, sv[w], si[w]);
    idx[blockIdx.x] = bi == kNone ? 0 : bi;
  }
}

}  // namespace

void argmax(hal::Stream& s, const ops::ArgmaxArgs& a) {
  const int64_t M = a.x.dim(0), N = a.x.dim(1);
  if (M == 0) return;
  auto& st = gpu_stream(s);
  MSA_DISPATCH_ACT(a.x.dtype, DT, {
    argmax_kernel<DT>
        <<<static_cast<unsigned>(M), 256, 0, st.native()>>>(a.x.data<typename Elem<DT>::T>(), a.idx.data<int32_t>(), N);
  });
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
