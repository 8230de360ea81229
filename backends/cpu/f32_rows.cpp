// to_f32 (f32_rows.h): per-target conversion of whole tensors to f32 with convert-inl.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/f32_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstdint>

#include "backends/cpu/convert-inl.h"
#include "backends/cpu/parallel.h"
#include "hal/dtype.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// dst[0..n) = the n elements of dtype t at src as f32, `row` elements per task.
void ConvertToF32(hal::DType t, const void* src, int64_t n, int64_t row, float* dst) {
  parallel_for((n + row - 1) / row,
               [&](int64_t r) {
                 const int64_t i0 = r * row, m = std::min(n, i0 + row) - i0;
                 switch (t) {
                   case hal::DType::f32:
                     ConvertRow(static_cast<const float*>(src) + i0, static_cast<size_t>(m), 1.0f, dst + i0);
                     break;
                   case hal::DType::bf16:
                     ConvertRow(static_cast<const hwy::bfloat16_t*>(src) + i0, static_cast<size_t>(m), 1.0f, dst + i0);
                     break;
                   case hal::DType::f16:
                     ConvertRow(static_cast<const hwy::float16_t*>(src) + i0, static_cast<size_t>(m), 1.0f, dst + i0);
                     break;
                   default:
                     for (int64_t i = i0; i < i0 + m; ++i) dst[i] = hal::load_as_f32(t, src, static_cast<size_t>(i));
                 }
               },
               16);
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/f32_rows.h"

namespace msa::cpu {

HWY_EXPORT(ConvertToF32);

std::vector<float> to_f32(const hal::Tensor& t, int64_t row) {
  const int64_t n = t.present() ? t.numel() : 0;
  std::vector<float> v(static_cast<size_t>(n));
  if (n > 0) HWY_DYNAMIC_DISPATCH(ConvertToF32)(t.dtype, t.data<const uint8_t>(), n, row, v.data());
  return v;
}

}  // namespace msa::cpu
#endif  // HWY_ONCE
