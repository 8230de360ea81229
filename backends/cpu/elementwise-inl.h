// Per-target helpers (Highway) of the row-wise and elementwise ops (rms_norm, swiglu,
// add): rows of f32 / bf16 / f16 elements loaded as f32 and stored back, and a binary
// elementwise map over fixed chunks in parallel. Included by the op files after
// hwy/highway.h, once per target.
#if defined(MSA_CPU_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_CPU_ELEMENTWISE_INL_H_
#undef MSA_CPU_ELEMENTWISE_INL_H_
#else
#define MSA_CPU_ELEMENTWISE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "backends/cpu/convert-inl.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hal/tensor.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// Loads n elements of dtype t from base + i into f32 dst.
HWY_INLINE void LoadRow(hal::DType t, const void* base, size_t i, size_t n, float* dst) {
  switch (t) {
    case hal::DType::bf16:
      ConvertRow(static_cast<const hwy::bfloat16_t*>(base) + i, n, 1.0f, dst);
      break;
    case hal::DType::f16:
      ConvertRow(static_cast<const hwy::float16_t*>(base) + i, n, 1.0f, dst);
      break;
    default:
      ConvertRow(static_cast<const float*>(base) + i, n, 1.0f, dst);
      break;
  }
}
// Stores f32 src into n elements of dtype t at base + i (round to nearest even).
HWY_INLINE void StoreRow(hal::DType t, const float* src, size_t n, void* base, size_t i) {
  switch (t) {
    case hal::DType::bf16:
      for (size_t j = 0; j < n; ++j) FromF32(src[j], static_cast<hwy::bfloat16_t*>(base) + i + j);
      break;
    case hal::DType::f16:
      for (size_t j = 0; j < n; ++j) FromF32(src[j], static_cast<hwy::float16_t*>(base) + i + j);
      break;
    default:
      std::copy(src, src + n, static_cast<float*>(base) + i);
      break;
  }
}

constexpr size_t kChunk = 16384;  // elements per parallel task

// y = f(a, b) elementwise in f32 over fixed chunks.
template <class F>
HWY_INLINE void Binary(const hal::Tensor& ta, const hal::Tensor& tb, const hal::Tensor& ty, F f) {
  const size_t n = static_cast<size_t>(ta.numel());
  parallel_for(static_cast<int64_t>((n + kChunk - 1) / kChunk), [&](int64_t c) {
    const DF df;
    const size_t L = hn::Lanes(df);
    const size_t i0 = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, n - i0);
    float* x = scratch_floats(0, len);
    float* y = scratch_floats(1, len);
    LoadRow(ta.dtype, ta.data<const void>(), i0, len, x);
    LoadRow(tb.dtype, tb.data<const void>(), i0, len, y);
    size_t i = 0;
    for (; i + L <= len; i += L) hn::StoreU(f(df, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, x + i);
    if (i < len) {  // tail through a padded vector
      alignas(64) float bx[64] = {0}, by[64] = {0};
      std::copy(x + i, x + len, bx);
      std::copy(y + i, y + len, by);
      hn::StoreU(f(df, hn::LoadU(df, bx), hn::LoadU(df, by)), df, bx);
      std::copy(bx, bx + (len - i), x + i);
    }
    StoreRow(ty.dtype, x, len, ty.data<void>(), i0);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#endif  // MSA_CPU_ELEMENTWISE_INL_H_
