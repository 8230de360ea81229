// Per-target helpers (Highway): loading f32 / bf16 / f16 / fp8_e4m3 elements as f32
// vectors, converting key / value rows into f32 tiles, and the register budget of the
// target. Included by the kernel files after hwy/highway.h, once per target.
#if defined(MSA_CPU_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_CPU_CONVERT_INL_H_
#undef MSA_CPU_CONVERT_INL_H_
#else
#define MSA_CPU_CONVERT_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hal/dtype.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = decltype(hn::Zero(DF()));

// Vector registers of the target: AVX-512 has 32, AVX2 and SSE 16.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
inline constexpr int kVecRegs = 32;
#else
inline constexpr int kVecRegs = 16;
#endif

// Storage types of the element dtypes (bf16 and f16 as Highway's 16-bit structs).
struct Fp8E4m3 {
  uint8_t bits;
};

// Scalar element -> f32 (tails and odd sizes).
HWY_INLINE float ToF32(float x) { return x; }
HWY_INLINE float ToF32(hwy::bfloat16_t x) {
  uint16_t b;
  std::memcpy(&b, &x, 2);
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
HWY_INLINE float ToF32(hwy::float16_t x) {
  uint16_t b;
  std::memcpy(&b, &x, 2);
  return hal::f16_to_f32(b);
}
HWY_INLINE float ToF32(Fp8E4m3 x) { return hal::fp8_e4m3_to_f32(x.bits); }

// f32 -> element (round to nearest even), for outputs.
HWY_INLINE void FromF32(float x, float* HWY_RESTRICT dst) { *dst = x; }
HWY_INLINE void FromF32(float x, hwy::bfloat16_t* HWY_RESTRICT dst) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  // Round to nearest even; NaN stays a (quiet) NaN.
  const uint16_t b = (u & 0x7FFFFFFFu) > 0x7F800000u ? static_cast<uint16_t>((u >> 16) | 0x40u)
                                                     : static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  std::memcpy(dst, &b, 2);
}
HWY_INLINE void FromF32(float x, hwy::float16_t* HWY_RESTRICT dst) {
  const uint16_t b = hal::f32_to_f16(x);
  std::memcpy(dst, &b, 2);
}

// Lanes(DF) consecutive elements at p as f32.
HWY_INLINE VF LoadF32(DF df, const float* HWY_RESTRICT p) { return hn::LoadU(df, p); }
HWY_INLINE VF LoadF32(DF df, const hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dbf;
  return hn::PromoteTo(df, hn::LoadU(dbf, p));
}
HWY_INLINE VF LoadF32(DF df, const hwy::float16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, p));
}
// E4M3FN: a normal value (exponent field e >= 1) is the f32 whose exponent is e + 120
// and whose top mantissa bits are the 3 fp8 ones, so its bits are (mag << 20) + (120 << 23);
// a subnormal (e = 0) is m * 2^-9, exact from the integer; 0x7F is NaN; the sign bit moves
// to bit 31. No f32 subnormal is ever touched (they would take microcode assists).
HWY_INLINE VF LoadF32(DF df, const Fp8E4m3* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint8_t, DF> du8;
  const auto x = hn::PromoteTo(du, hn::LoadU(du8, reinterpret_cast<const uint8_t*>(p)));
  const auto mag = hn::And(x, hn::Set(du, 0x7Fu));
  const auto sign = hn::ShiftLeft<24>(hn::And(x, hn::Set(du, 0x80u)));
  const VF normal = hn::BitCast(df, hn::Add(hn::ShiftLeft<20>(mag), hn::Set(du, 120u << 23)));
  const VF sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mag)), hn::Set(df, 1.0f / 512.0f));
  VF v = hn::IfThenElse(hn::RebindMask(df, hn::Lt(mag, hn::Set(du, 8u))), sub, normal);
  v = hn::IfThenElse(hn::RebindMask(df, hn::Eq(mag, hn::Set(du, 0x7Fu))), hn::NaN(df), v);
  return hn::Or(v, hn::BitCast(df, sign));
}

// dst[0..n) = src[0..n) as f32, times `mul`.
template <typename T>
HWY_INLINE void ConvertRow(const T* HWY_RESTRICT src, size_t n, float mul, float* HWY_RESTRICT dst) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  if (mul == 1.0f) {
    for (; i + N <= n; i += N) hn::StoreU(LoadF32(df, src + i), df, dst + i);
  } else {
    const VF m = hn::Set(df, mul);
    for (; i + N <= n; i += N) hn::StoreU(hn::Mul(LoadF32(df, src + i), m), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = ToF32(src[i]) * mul;
}

// Converts rows [0, nk) of a strided matrix (row j at src + j*stride, D elements) into
// dst[j][D] f32, times row_scale[j] when given.
template <typename T>
HWY_INLINE void ConvertRows(const T* HWY_RESTRICT src, size_t stride, size_t nk, size_t D,
                            const float* HWY_RESTRICT row_scale, float* HWY_RESTRICT dst) {
  for (size_t j = 0; j < nk; ++j)
    ConvertRow(src + j * stride, D, row_scale != nullptr ? row_scale[j] : 1.0f, dst + j * D);
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#endif  // MSA_CPU_CONVERT_INL_H_
