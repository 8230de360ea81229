// The maximum the CUDA-only indexers pool with: NaN-propagating (fmaxf drops a NaN
// operand), so a valid token's NaN logit makes its block score NaN (docs/spec.md,
// "Non-finite inputs"). One instruction on sm_80+ (max.NaN.f32).
#pragma once

namespace msa::cuda {

__device__ __forceinline__ float max_nan(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return (a != a || b != b) ? __uint_as_float(0x7fc00000u) : fmaxf(a, b);
#endif
}

}  // namespace msa::cuda
