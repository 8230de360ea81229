// Per-target helpers (Highway): loading f32 / bf16 / f16 / fp8_e4m3 elements as f32
// vectors, decoding NVFP4 key groups, converting key / value rows into f32 tiles, and the
// register budget of the target. Included by the kernel files after hwy/highway.h, once
// per target.
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

// NVFP4 keys (hal/nvfp4.h): twice the E2M1 value of each signed code. These are the
// integers 0, 1, 2, 3, 4, 6, 8, 12 and their negatives, so one byte shuffle decodes 16 codes
// and the group multiplier (0.5 * the e4m3 scale) carries the half. Products of such an
// integer and an e4m3 value are exact in f32, so the decoded keys are the exact ones.
// Code 8 (-0) decodes to +0, which changes no sum.
alignas(16) inline constexpr int8_t kE2m1Twice[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

#if HWY_TARGET == HWY_SCALAR
// Decodes ng consecutive NVFP4 groups (codes: 8 bytes each, low nibble = even element;
// gmul[g] = 0.5 * the e4m3 scale of group g) into dst[16 * ng]. The rows of a key block
// are contiguous, so a block of nk rows of D dims is nk * D / 16 groups.
HWY_INLINE void DecodeNvfp4(const uint8_t* HWY_RESTRICT codes, const float* HWY_RESTRICT gmul, size_t ng,
                            float* HWY_RESTRICT dst) {
  for (size_t i = 0; i < 16 * ng; ++i)
    dst[i] = static_cast<float>(kE2m1Twice[(codes[i / 2] >> (4 * (i % 2))) & 15]) * gmul[i / 16];
}
#else
// dst[0..16) = the 16 decoded values vals (int8, twice the E2M1 values) times mul. (A
// template, so that only the branch of this target's width is instantiated.)
template <class D, class V8>
HWY_INLINE void StoreNvfp4Group(D df, V8 vals, float mul, float* HWY_RESTRICT dst) {
  const hn::RebindToSigned<D> di;
  const auto m = hn::Set(df, mul);
  constexpr size_t kN = hn::MaxLanes(D());
  if constexpr (kN == 16) {
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, vals)), m), df, dst);
  } else if constexpr (kN == 8) {
    const hn::Half<hn::Full128<int8_t> > dh;
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LowerHalf(dh, vals))), m), df, dst);
    hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::UpperHalf(dh, vals))), m), df, dst + 8);
  } else {
    // Narrow or scalable vectors: the run-time lane count (MaxLanes can exceed it on
    // SVE / RVV), a scalar tail when it does not divide 16.
    alignas(16) int8_t v8[16];
    hn::Store(vals, hn::Full128<int8_t>(), v8);
    const hn::Rebind<int8_t, D> dq;
    const size_t n = hn::Lanes(df);
    size_t i = 0;
    for (; n <= 16 && i + n <= 16; i += n)
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(dq, v8 + i))), m), df, dst + i);
    for (; i < 16; ++i) dst[i] = static_cast<float>(v8[i]) * mul;
  }
}

// Decodes ng consecutive NVFP4 groups (codes: 8 bytes each, low nibble = even element;
// gmul[g] = 0.5 * the e4m3 scale of group g) into dst[16 * ng]. The rows of a key block
// are contiguous, so a block of nk rows of D dims is nk * D / 16 groups. Two groups per
// step: 16 bytes split into low and high nibbles, interleaved back into element order,
// then one byte shuffle per group.
HWY_INLINE void DecodeNvfp4(const uint8_t* HWY_RESTRICT codes, const float* HWY_RESTRICT gmul, size_t ng,
                            float* HWY_RESTRICT dst) {
  const DF df;
  const hn::Full128<uint8_t> du8;
  const hn::Full128<int8_t> d8;
  const auto tbl = hn::Load(d8, kE2m1Twice);
  const auto mask = hn::Set(du8, uint8_t{0x0F});
  size_t g = 0;
  for (; g + 2 <= ng; g += 2) {
    const auto raw = hn::LoadU(du8, codes + 8 * g);
    const auto lo = hn::And(raw, mask), hi = hn::ShiftRight<4>(raw);
    const auto c0 = hn::BitCast(d8, hn::InterleaveLower(du8, lo, hi));
    const auto c1 = hn::BitCast(d8, hn::InterleaveUpper(du8, lo, hi));
    StoreNvfp4Group(df, hn::TableLookupBytes(tbl, c0), gmul[g], dst + 16 * g);
    StoreNvfp4Group(df, hn::TableLookupBytes(tbl, c1), gmul[g + 1], dst + 16 * g + 16);
  }
  if (g < ng) {  // the last group alone: 8 bytes (reading 16 could pass the buffer's end)
    uint64_t w;
    std::memcpy(&w, codes + 8 * g, 8);
    const auto raw = hn::BitCast(du8, hn::Set(hn::Full128<uint64_t>(), w));
    const auto c0 = hn::BitCast(d8, hn::InterleaveLower(du8, hn::And(raw, mask), hn::ShiftRight<4>(raw)));
    StoreNvfp4Group(df, hn::TableLookupBytes(tbl, c0), gmul[g], dst + 16 * g);
  }
}
#endif

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
