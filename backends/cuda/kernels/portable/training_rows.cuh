// Constants and small helpers of the training kernels (the *_backward files and
// indexer_kl): the head-dim limit, the key slots of a slab CTA, and the -inf test of a
// row's lse.
#pragma once
#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/training_limits.h"

namespace msa::MSA_GPU_NS {

inline constexpr int kMaxHeadDim = static_cast<int>(training_limits::kMaxHeadDim);
// Key slots of one CTA of the dk/dv slab kernel: a slab of Bs slots is covered by
// ceil(Bs / kSlotChunk) CTAs.
inline constexpr int kSlotChunk = 32;

__device__ __forceinline__ bool is_neg_inf(float x) { return __float_as_uint(x) == 0xff800000u; }

}  // namespace msa::MSA_GPU_NS
