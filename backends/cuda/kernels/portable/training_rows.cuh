// Row helpers of the training kernels (the *_backward and indexer_kl files): a head-dim
// row spread over a wave's lanes (lane l holds dims l, l + kWarp, ..; up to
// kMaxHeadDim dims) and its wave-wide dot product.
#pragma once
#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/training_limits.h"

namespace msa::MSA_GPU_NS {

inline constexpr int kMaxHeadDim = static_cast<int>(training_limits::kMaxHeadDim);
inline constexpr int kLaneDims = kMaxHeadDim / kWarp;  // dims per lane
// Key slots of one CTA of the slab kernels (dk/dv, dki): a slab of Bs slots is covered
// by ceil(Bs / kSlotChunk) CTAs, each warp owning kSlotChunk / warps of them.
inline constexpr int kSlotChunk = 32;

__device__ __forceinline__ bool is_neg_inf(float x) { return __float_as_uint(x) == 0xff800000u; }

// Row elements [off, off + D) of `base` (element type DT) as this lane's dims; 0 past D.
template <int DT>
__device__ __forceinline__ void lane_row(const void* base, int64_t off, int D, int lane, float (&r)[kLaneDims]) {
  using T = typename Elem<DT>::T;
  const T* p = static_cast<const T*>(base) + off;
#pragma unroll
  for (int i = 0; i < kLaneDims; ++i) {
    const int d = lane + i * kWarp;
    r[i] = d < D ? Elem<DT>::load(p[d]) : 0.0f;
  }
}

// The same from a zero-padded f32 row of kMaxHeadDim floats (shared memory).
__device__ __forceinline__ void lane_row_f32(const float* row, int lane, float (&r)[kLaneDims]) {
#pragma unroll
  for (int i = 0; i < kLaneDims; ++i) r[i] = row[lane + i * kWarp];
}

// Dot product of two lane rows; every lane gets it. Call with the whole wave.
__device__ __forceinline__ float lane_dot(const float (&a)[kLaneDims], const float (&b)[kLaneDims]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kLaneDims; ++i) s += a[i] * b[i];
  return warp_sum(s);
}

// Stores this lane's dims of a row to dst[0, D).
__device__ __forceinline__ void store_lane_row(const float (&r)[kLaneDims], int D, int lane, float* dst) {
#pragma unroll
  for (int i = 0; i < kLaneDims; ++i) {
    const int d = lane + i * kWarp;
    if (d < D) dst[d] = r[i];
  }
}

// acc += w * x, lane-wise.
__device__ __forceinline__ void lane_axpy(float (&acc)[kLaneDims], float w, const float (&x)[kLaneDims]) {
#pragma unroll
  for (int i = 0; i < kLaneDims; ++i) acc[i] += w * x[i];
}

// Sums each warp's lane row into row[0, D) in warp order (deterministic); `row` is
// kMaxHeadDim floats of shared memory. Call with every thread of the block.
template <int kThreads>
__device__ __forceinline__ void sum_warp_rows(const float (&acc)[kLaneDims], int D, float* row) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int w = 0; w < kThreads / kWarp; ++w) {
    if (warp == w) {
#pragma unroll
      for (int i = 0; i < kLaneDims; ++i) {
        const int d = lane + i * kWarp;
        if (d < D) row[d] = w == 0 ? acc[i] : row[d] + acc[i];
      }
    }
    __syncthreads();
  }
}

}  // namespace msa::MSA_GPU_NS
