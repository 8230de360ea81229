// NVFP4 indexer keys (docs/spec.md, "NVFP4 indexer keys"): each key row of Di values is
// stored as Di/2 bytes of OCP E2M1 codes (fp4_e2m1x2: low nibble = even element) plus
// Di/16 E4M3 scales, one per group of 16 consecutive dims. Element d decodes to
// e2m1(code d) * e4m3(scale d / 16). E2M1: 1 sign bit, 2 exponent bits (bias 1), 1
// mantissa bit; the magnitudes of codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6.
#pragma once
#include <cstddef>
#include <cstdint>

#include "hal/export.h"

namespace msa::hal {

inline constexpr int kNvfp4Group = 16;  // dims per scale

// Value of the E2M1 code in the low 4 bits of `nibble`.
MSA_API float e2m1_to_f32(uint8_t nibble);

// Element i of a packed E2M1 row (unscaled).
inline float e2m1_element(const uint8_t* packed, size_t i) {
  return e2m1_to_f32(static_cast<uint8_t>(packed[i / 2] >> (4 * (i % 2))));
}

// The E2M1 code (0..15) of x for the group scale s > 0: the magnitude nearest |x| / s,
// ties to the even code, saturating at 6; the sign of x, except that code 0 is +0 and NaN
// gives +0. Decided by exact comparisons of |x| with s * {0.25, 0.75, ...} (products of an
// E4M3 value and a 3-bit constant are exact in f32), so every backend agrees bit for bit.
MSA_API uint8_t e2m1_code(float x, float s);

// Quantizes one group of 16 values: amax = the largest |x| that is not NaN, the scale is
// e4m3(amax * f32(1/6)) (round to nearest even, saturating at 448), and the codes are
// e2m1_code(x, scale), all 0 when the scale is 0. Writes 8 packed bytes and 1 scale byte.
MSA_API void quantize_nvfp4_group(const float* x, uint8_t* packed, uint8_t* scale);

// f32(1/6), the multiplier of the scale rule (bits 0x3e2aaaab).
inline constexpr float kNvfp4InvMax = 1.0f / 6.0f;

}  // namespace msa::hal
