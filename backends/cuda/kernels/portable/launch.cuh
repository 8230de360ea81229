// Host-side launch helpers shared by the portable kernels: dtype dispatch, grid sizing,
// and the row/column split of a tensor.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/check.h"
#include "backends/cuda/common.cuh"
#include "backends/cuda/stream.h"
#include "hal/dtype.h"
#include "hal/error.h"
#include "hal/tensor.h"

namespace msa::MSA_GPU_NS {

inline int dt_code(hal::DType t) { return static_cast<int>(t); }

// Runs BODY with `constexpr int DT` bound to the activation dtype t (f32, f16, bf16).
#define MSA_DISPATCH_ACT(t, DT, ...)                                                          \
  switch (t) {                                                                                \
    case ::msa::hal::DType::f32: {                                                            \
      constexpr int DT = kF32;                                                                \
      __VA_ARGS__;                                                                            \
    } break;                                                                                  \
    case ::msa::hal::DType::f16: {                                                            \
      constexpr int DT = kF16;                                                                \
      __VA_ARGS__;                                                                            \
    } break;                                                                                  \
    case ::msa::hal::DType::bf16: {                                                           \
      constexpr int DT = kBF16;                                                               \
      __VA_ARGS__;                                                                            \
    } break;                                                                                  \
    default:                                                                                  \
      throw ::msa::Error(std::string("cuda: unexpected dtype ") + ::msa::hal::dtype_name(t)); \
  }

inline int64_t last_dim(const hal::Tensor& t) { return t.rank == 0 ? 1 : t.dim(-1); }
inline int64_t leading_rows(const hal::Tensor& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.rank; ++i) r *= t.shape[i];
  return r;
}

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, int threads, const DeviceProps& p) {
  const int64_t want = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(want, int64_t{p.sm_count} * 16)));
}

// Sets Kernel's dynamic shared memory limit to `bytes`, once per kernel and device (the
// attribute call costs host time on every launch otherwise). Always set, even under
// 48 KiB: static shared memory counts towards the same default 48 KiB limit.
template <auto Kernel>
void allow_smem(int bytes, int device) {
  static unsigned done = 0;  // bit per device ordinal (< 32)
  if (device < 32 && ((done >> device) & 1u) != 0) return;
  MSA_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (device < 32) done |= 1u << device;
}

// The stream's counter slot if it is below n (the kernel's table size), else -1: kernels
// that keep per-stream device state fall back to a stateless variant then.
inline int stream_slot(const Stream& s, int n) {
  const int i = s.counter_slot();
  return i >= 0 && i < n ? i : -1;
}

}  // namespace msa::MSA_GPU_NS
