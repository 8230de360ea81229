#include "hal/dtype.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "hal/error.h"

namespace msa::hal {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::fp8_e4m3:
      return 1;
    case DType::i32:
      return 4;
    case DType::fp4_e2m1x2:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::fp8_e4m3:
      return "fp8_e4m3";
    case DType::i32:
      return "i32";
    case DType::fp4_e2m1x2:
      return "fp4_e2m1x2";
  }
  return "?";
}

DType parse_dtype(std::string_view name, const std::string& arg) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "float32" || s == "float") return DType::f32;
  if (s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "fp8_e4m3" || s == "e4m3" || s == "f8_e4m3" || s == "float8_e4m3fn") return DType::fp8_e4m3;
  if (s == "i32" || s == "int32") return DType::i32;
  if (s == "fp4_e2m1x2" || s == "nvfp4" || s == "e2m1x2") return DType::fp4_e2m1x2;
  throw Error("argument '" + arg + "': unknown dtype '" + std::string(name) +
              "' (expected f32, f16, bf16, fp8_e4m3, i32 or fp4_e2m1x2 (nvfp4))");
}

bool is_activation_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

uint16_t f32_to_bf16(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_f32(uint16_t x) { return std::bit_cast<float>(static_cast<uint32_t>(x) << 16); }

uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                               // subnormal half (or zero): value = m * 2^-24
    const float a = std::bit_cast<float>(absx);
    const float scaled = a * 16777216.0f;                              // 2^24, exact
    const uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));  // RNE
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into exponent: fine
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

float fp8_e4m3_to_f32(uint8_t x) {
  const bool neg = x & 0x80u;
  const int exp = (x >> 3) & 0xf;
  const int mant = x & 0x7;
  float v;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -9);  // subnormal: m/8 * 2^-6
  else
    v = std::ldexp(1.0f + mant / 8.0f, exp - 7);
  return neg ? -v : v;
}

uint8_t f32_to_fp8_e4m3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80u : 0u;
  if (std::isnan(f)) return 0x7fu | sign;
  float a = std::fabs(f);
  if (a >= 448.0f) return static_cast<uint8_t>(sign | 0x7eu);  // saturate to max finite
  // Find the nearest representable value by rounding on the value grid (RNE).
  int e;
  std::frexp(a, &e);                         // a = m * 2^e, m in [0.5, 1)
  int exp_unbiased = e - 1;                  // a in [2^exp, 2^(exp+1))
  if (exp_unbiased < -6) exp_unbiased = -6;  // subnormal range shares the 2^-9 step
  const float step = std::ldexp(1.0f, exp_unbiased - 3);
  float q = std::nearbyint(a / step) * step;  // RNE on the grid
  if (q >= 448.0f) return static_cast<uint8_t>(sign | 0x7eu);
  if (q == 0.0f) return sign;
  int qe;
  std::frexp(q, &qe);
  int ue = qe - 1;
  if (ue < -6) {  // subnormal
    const int m = static_cast<int>(q / std::ldexp(1.0f, -9));
    return static_cast<uint8_t>(sign | m);
  }
  const int m = static_cast<int>((q / std::ldexp(1.0f, ue) - 1.0f) * 8.0f + 0.5f);
  return static_cast<uint8_t>(sign | ((ue + 7) << 3) | m);
}

float round_to(DType t, float x) {
  switch (t) {
    case DType::f16:
      return f16_to_f32(f32_to_f16(x));
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(x));
    case DType::fp8_e4m3:
      return fp8_e4m3_to_f32(f32_to_fp8_e4m3(x));
    default:
      return x;
  }
}

float load_as_f32(DType t, const void* base, size_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::f16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::bf16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::fp8_e4m3:
      return fp8_e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    case DType::fp4_e2m1x2:
      return static_cast<float>(static_cast<const uint8_t*>(base)[i]);  // raw byte
  }
  return 0.0f;
}

void store_from_f32(DType t, void* base, size_t i, float x) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(base)[i] = x;
      break;
    case DType::f16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(x);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(x);
      break;
    case DType::fp8_e4m3:
      static_cast<uint8_t*>(base)[i] = f32_to_fp8_e4m3(x);
      break;
    case DType::i32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(x);
      break;
    case DType::fp4_e2m1x2:  // raw byte, clamped to 0..255 (NaN -> 0)
      static_cast<uint8_t*>(base)[i] =
          static_cast<uint8_t>(std::isnan(x) ? 0.0f : std::clamp(std::nearbyint(x), 0.0f, 255.0f));
      break;
  }
}

}  // namespace msa::hal
