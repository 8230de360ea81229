// Device helpers shared by every kernel of this folder (CUDA and, through vendor.h, HIP):
// element types and conversions (bf16/f16/fp8 by bit manipulation, round to nearest
// even), warp/wave reductions whose width is a template parameter (never a hard-coded
// 32), a block-wide exclusive scan, and 16-byte vector loads.
#pragma once
#include <cstdint>

#include "backends/cuda/vendor.h"

namespace msa::MSA_GPU_NS {

// Element type codes: equal to the values of hal::DType (kFP4: NVFP4 key bytes, two E2M1
// codes each; decoded with their e4m3 group scales, never through Elem / load_any).
enum : int { kF32 = 0, kF16 = 1, kBF16 = 2, kFP8 = 3, kI32 = 4, kFP4 = 5 };

constexpr int kWarp = MSA_WARP_SIZE;

// ---- scalar conversions ---------------------------------------------------------------
__device__ __forceinline__ float bf16_bits_to_f32(uint16_t u) { return __uint_as_float(uint32_t{u} << 16); }
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__device__ __forceinline__ float f16_bits_to_f32(uint16_t u) { return __half2float(__ushort_as_half(u)); }
__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }

// OCP E4M3FN: bias 7, no infinities, S.1111.111 is NaN, max 448.
__device__ __forceinline__ float fp8_bits_to_f32(uint8_t u) {
  const uint32_t sign = (u & 0x80u) << 24;
  const uint32_t e = (u >> 3) & 0xfu, m = u & 7u;
  float v;
  if (e == 15 && m == 7) return __uint_as_float(sign | 0x7fc00000u);
  if (e == 0)
    v = static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  else
    v = __uint_as_float(((e + 120u) << 23) | (m << 20));
  return __uint_as_float(__float_as_uint(v) | sign);
}
// Round to nearest even, saturating to +-448, NaN kept.
__device__ __forceinline__ uint8_t f32_to_fp8_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const float a = fabsf(f);
  if (a != a) return static_cast<uint8_t>(sign | 0x7fu);
  if (a >= 464.0f) return static_cast<uint8_t>(sign | 0x7eu);  // >= halfway past 448: saturate
  const uint32_t au = __float_as_uint(a);
  const int exp = static_cast<int>(au >> 23) - 127;
  uint32_t bits;
  if (exp < -6) {  // subnormal in e4m3: units of 2^-9
    const float q = a * 512.0f;
    float r = rintf(q);               // round half to even
    bits = static_cast<uint32_t>(r);  // 0..8 (8 = smallest normal)
  } else {
    // keep 3 mantissa bits, round to nearest even
    uint32_t mant = au & 0x7fffffu;
    uint32_t keep = mant >> 20, rest = mant & 0xfffffu;
    uint32_t e = static_cast<uint32_t>(exp + 7);
    if (rest > 0x80000u || (rest == 0x80000u && (keep & 1u))) ++keep;
    if (keep == 8) {
      keep = 0;
      ++e;
    }
    bits = (e << 3) | keep;
    if (bits > 0x7eu) bits = 0x7eu;
  }
  return static_cast<uint8_t>(sign | bits);
}

// NVFP4 (hal/nvfp4.h). The two E2M1 codes of byte b as an f16x2 of value * 2^-14 (low
// half = low nibble): sign to bit 15, the 3 magnitude bits to bits 9..11, which read as
// f16 give exponent E and mantissa m, i.e. (1 + m/2) 2^(E-15) or, for E = 0, the
// subnormal m 2^-15: exactly e2m1 * 2^-14. Callers fold the 2^14 into a scale.
__device__ __forceinline__ uint32_t e2m1x2_to_f16x2_tiny(uint32_t b) {
  return ((b & 0x7u) << 9) | ((b & 0x8u) << 12) | ((b & 0x70u) << 21) | ((b & 0x80u) << 24);
}
// hal::e2m1_code: the E2M1 code of x for a group scale s > 0, by exact comparisons (ties
// to the even code, saturating at 6; code 0 is +0; NaN -> 0).
__device__ __forceinline__ uint32_t e2m1_code(float x, float s) {
  if (x != x) return 0u;
  const float a = fabsf(x);
  uint32_t c = (a > 0.25f * s) + (a >= 0.75f * s) + (a > 1.25f * s) + (a >= 1.75f * s) + (a > 2.5f * s) +
               (a >= 3.5f * s) + (a > 5.0f * s);
  return (c != 0u && (__float_as_uint(x) >> 31)) ? (c | 8u) : c;
}

// ---- element type tags ------------------------------------------------------------------
template <int DT>
struct Elem;
template <>
struct Elem<kF32> {
  using T = float;
  static __device__ __forceinline__ float load(T v) { return v; }
  static __device__ __forceinline__ T store(float f) { return f; }
};
template <>
struct Elem<kF16> {
  using T = uint16_t;
  static __device__ __forceinline__ float load(T v) { return f16_bits_to_f32(v); }
  static __device__ __forceinline__ T store(float f) { return f32_to_f16_bits(f); }
};
template <>
struct Elem<kBF16> {
  using T = uint16_t;
  static __device__ __forceinline__ float load(T v) { return bf16_bits_to_f32(v); }
  static __device__ __forceinline__ T store(float f) { return f32_to_bf16_bits(f); }
};
template <>
struct Elem<kFP8> {
  using T = uint8_t;
  static __device__ __forceinline__ float load(T v) { return fp8_bits_to_f32(v); }
  static __device__ __forceinline__ T store(float f) { return f32_to_fp8_bits(f); }
};

// Runtime-typed element access (for cold paths: a few loads per row).
__device__ __forceinline__ float load_any(const void* p, int dt, int64_t i) {
  switch (dt) {
    case kF32:
      return static_cast<const float*>(p)[i];
    case kF16:
      return f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case kBF16:
      return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case kFP8:
      return fp8_bits_to_f32(static_cast<const uint8_t*>(p)[i]);
    default:
      return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  }
}
__device__ __forceinline__ void store_any(void* p, int dt, int64_t i, float v) {
  switch (dt) {
    case kF32:
      static_cast<float*>(p)[i] = v;
      break;
    case kF16:
      static_cast<uint16_t*>(p)[i] = f32_to_f16_bits(v);
      break;
    case kBF16:
      static_cast<uint16_t*>(p)[i] = f32_to_bf16_bits(v);
      break;
    case kFP8:
      static_cast<uint8_t*>(p)[i] = f32_to_fp8_bits(v);
      break;
    default:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
  }
}

// 16 bytes = E elements of type DT, unpacked to floats.
template <int DT>
struct Vec16 {
  static constexpr int E = 16 / static_cast<int>(sizeof(typename Elem<DT>::T));
};
template <int DT>
__device__ __forceinline__ void unpack16(const uint4& v, float* out) {
  using T = typename Elem<DT>::T;
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < Vec16<DT>::E; ++i) out[i] = Elem<DT>::load(e[i]);
}
__device__ __forceinline__ uint4 ldg16(const void* p) { return __ldg(static_cast<const uint4*>(p)); }

// ---- ordered keys -------------------------------------------------------------------------
// Monotonic map of a float to uint32 (NaN treated as -inf, -0 as +0); larger float =>
// larger key. -inf maps to 0x007fffff, so 0 never comes from a real value.
__device__ __forceinline__ uint32_t ordered_key(float f) {
  if (f != f) f = -__int_as_float(0x7f800000);
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// NaN or +-inf, from the bits (no reliance on isfinite() under any math flags).
__device__ __forceinline__ bool nonfinite(float x) { return (__float_as_uint(x) & 0x7f800000u) == 0x7f800000u; }
// The quiet NaN the attention kernels write for a non-finite row (docs/spec.md).
__device__ __forceinline__ float quiet_nan() { return __uint_as_float(0x7fc00000u); }

// ---- warp / block reductions --------------------------------------------------------------
template <int W = kWarp>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(MSA_FULL_MASK, v, o, W);
  return v;
}
template <int W = kWarp>
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(MSA_FULL_MASK, v, o, W));
  return v;
}
template <int W = kWarp>
__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int o = W / 2; o > 0; o >>= 1) v += __shfl_xor_sync(MSA_FULL_MASK, v, o, W);
  return v;
}
template <int W = kWarp>
__device__ __forceinline__ int warp_incl_scan(int v, int lane) {
#pragma unroll
  for (int o = 1; o < W; o <<= 1) {
    int n = __shfl_up_sync(MSA_FULL_MASK, v, o, W);
    if (lane >= o) v += n;
  }
  return v;
}

// Block-wide sum of floats; `scratch` holds at least blockDim/kWarp floats. All threads
// get the result. Fixed order: deterministic.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nw = (blockDim.x + kWarp - 1) / kWarp;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = 0.0f;
  for (int i = 0; i < nw; ++i) r += scratch[i];
  return r;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nw = (blockDim.x + kWarp - 1) / kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int i = 1; i < nw; ++i) r = fmaxf(r, scratch[i]);
  return r;
}

// Block-wide exclusive scan of ints; returns the thread's exclusive prefix and sets
// *total. `scratch` holds at least blockDim/kWarp + 1 ints. Contains __syncthreads.
__device__ __forceinline__ int block_excl_scan(int v, int* scratch, int* total) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nw = (blockDim.x + kWarp - 1) / kWarp;
  const int incl = warp_incl_scan(v, lane);
  __syncthreads();
  if (lane == kWarp - 1 || threadIdx.x == blockDim.x - 1) scratch[warp] = incl;
  __syncthreads();
  int before = 0, all = 0;
  for (int i = 0; i < nw; ++i) {
    const int s = scratch[i];
    if (i < warp) before += s;
    all += s;
  }
  *total = all;
  return before + incl - v;
}

}  // namespace msa::MSA_GPU_NS
