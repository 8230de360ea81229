#include "hal/nvfp4.h"

#include <cmath>

#include "hal/dtype.h"

namespace msa::hal {

float e2m1_to_f32(uint8_t nibble) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[nibble & 7u];
  return (nibble & 8u) ? -m : m;
}

uint8_t e2m1_code(float x, float s) {
  if (std::isnan(x)) return 0;
  const float a = std::fabs(x);
  // Code boundaries (midpoints between magnitudes); at a tie the even code wins, so the
  // comparison is > where the lower code is even and >= where the upper one is.
  uint8_t code = 0;
  code += a > 0.25f * s;
  code += a >= 0.75f * s;
  code += a > 1.25f * s;
  code += a >= 1.75f * s;
  code += a > 2.5f * s;
  code += a >= 3.5f * s;
  code += a > 5.0f * s;
  return code != 0 && std::signbit(x) ? static_cast<uint8_t>(code | 8u) : code;
}

void quantize_nvfp4_group(const float* x, uint8_t* packed, uint8_t* scale) {
  float amax = 0.0f;
  for (int i = 0; i < kNvfp4Group; ++i)
    if (!std::isnan(x[i])) amax = std::fmax(amax, std::fabs(x[i]));
  const uint8_t sb = f32_to_fp8_e4m3(amax * kNvfp4InvMax);
  const float s = fp8_e4m3_to_f32(sb);
  *scale = sb;
  for (int i = 0; i < kNvfp4Group; i += 2) {
    const uint8_t lo = s > 0.0f ? e2m1_code(x[i], s) : 0, hi = s > 0.0f ? e2m1_code(x[i + 1], s) : 0;
    packed[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

}  // namespace msa::hal
