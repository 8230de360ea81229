#version 450
#extension GL_GOOGLE_include_directive : require
// kv_append, indexer-key part: one workgroup per new token converts its Di indexer key
// values (KI_TYPE) to the cache dtype (KC_TYPE) in slot pos % Bs of its page. fp8 keys
// with a scale tensor store x / (amax / 448) and the scale (1 for an all-zero row); the
// two divisions are done in double when F64 is set, so they round exactly as the host's.
// NVFP4 keys (KC_TYPE DT_FP4, hal/nvfp4.h): one invocation per group of 16 dims computes
// the group's e4m3 scale byte and its 16 E2M1 codes with the exact rule of
// hal::quantize_nvfp4_group, and writes the group's 8 code bytes as two whole 32-bit
// words (plain stores; atomics per byte when the view is not word aligned) and its scale
// byte with per-byte atomics (neighbouring groups and rows share that word).
#if F64
#extension GL_ARB_gpu_shader_fp64 : require
#endif
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_ki, off_bt, off_kvlen, off_cuq, off_kic, off_kis;
  uint T, Di, P, Bs, max_blocks, B, has_scale;
} pc;

layout(std430, binding = 1) readonly buffer KiBuf { STORAGE(KI_TYPE) ki_d[]; };
layout(std430, binding = 2) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 3) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 4) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 5) buffer KicBuf { STORAGE(KC_TYPE) kic_d[]; };
#if KC_TYPE == DT_FP4
layout(std430, binding = 6) buffer KisBuf { uint kis_b[]; };  // e4m3 group scales
#else
layout(std430, binding = 6) buffer KisBuf { float kis_d[]; };
#endif

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"

float divide(float x, float y) {
#if F64
  return float(double(x) / double(y));
#else
  return x / y;
#endif
}

#if KC_TYPE == DT_FP4
// Byte i of a uint buffer := v, an atomic on this byte's bits only (clear, then set).
#define ST_BYTE(buf, i, v)                                \
  {                                                       \
    uint i_ = (i), sh_ = (i_ & 3u) * 8u;                  \
    atomicAnd(buf[i_ >> 2], ~(0xffu << sh_));             \
    atomicOr(buf[i_ >> 2], ((v) & 0xffu) << sh_);         \
  }

bool is_nan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }

// hal::e2m1_code for a scale s > 0: the E2M1 magnitude nearest |x| / s by exact
// comparisons (s * constant is exact in f32), the sign of x unless the code is 0; NaN -> 0.
uint e2m1_code(float x, float s) {
  if (is_nan(x)) return 0u;
  precise float a = abs(x);
  uint c = uint(a > 0.25 * s) + uint(a >= 0.75 * s) + uint(a > 1.25 * s) + uint(a >= 1.75 * s) +
           uint(a > 2.5 * s) + uint(a >= 3.5 * s) + uint(a > 5.0 * s);
  return c != 0u && (floatBitsToUint(x) >> 31) != 0u ? c | 8u : c;
}

// Group g of token t into row `row`: hal::quantize_nvfp4_group.
void quantize_group(uint t, uint row, uint g) {
  float x[16];
  float amax = 0.0;
  [[unroll]] for (uint i = 0u; i < 16u; ++i) {
    x[i] = LD(KI_TYPE, ki_d, pc.off_ki + t * pc.Di + 16u * g + i);
    if (!is_nan(x[i])) amax = max(amax, abs(x[i]));
  }
  // e4m3(amax * f32(1/6)): a correctly rounded f32 multiply by the constant of bits
  // 0x3e2aaaab, then round to nearest even, saturating at 448.
  precise float sv = amax * uintBitsToFloat(0x3e2aaaabu);
  uint sb = f32_to_fp8(sv);
  float s = fp8_to_f32(sb);
  uint w0 = 0u, w1 = 0u;
  if (s > 0.0) {
    [[unroll]] for (uint i = 0u; i < 8u; ++i) {
      w0 |= e2m1_code(x[i], s) << (4u * i);
      w1 |= e2m1_code(x[8u + i], s) << (4u * i);
    }
  }
  uint ng = pc.Di / 16u;
  uint b0 = pc.off_kic + row * (pc.Di / 2u) + 8u * g;  // first code byte of the group
  if ((b0 & 3u) == 0u) {  // two whole words of this group only
    kic_d[b0 >> 2] = w0;
    kic_d[(b0 >> 2) + 1u] = w1;
  } else {
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
      ST_BYTE(kic_d, b0 + i, w0 >> (8u * i))
      ST_BYTE(kic_d, b0 + 4u + i, w1 >> (8u * i))
    }
  }
  ST_BYTE(kis_b, pc.off_kis + row * ng + g, sb)
}
#endif

void main() {
  uint t = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.max_blocks * pc.Bs;
  if (t >= pc.T || pc.B == 0u) return;
  uint b = seq_find(t);
  SeqInfo s = seq_info(b, maxkv);
  if (!s.ok || int(t) < s.q0 || int(t) >= s.q0 + s.qlen) return;  // flagged by kv_append.kv
  uint pos = uint(s.pos0 + (int(t) - s.q0));
  int page = bt_d[pc.off_bt + b * pc.max_blocks + pos / pc.Bs];
  if (page < 0 || uint(page) >= pc.P) return;  // flagged by kv_append.kv
  uint row = uint(page) * pc.Bs + pos % pc.Bs;
#if KC_TYPE == DT_FP4
  for (uint g = tid; g < pc.Di / 16u; g += WGS) quantize_group(t, row, g);
#else
  float sc = 1.0;
#if KC_TYPE == DT_FP8
  if (pc.has_scale != 0u) {
    float amax = 0.0;
    for (uint d = tid; d < pc.Di; d += WGS) amax = max(amax, abs(LD(KI_TYPE, ki_d, pc.off_ki + t * pc.Di + d)));
    amax = wg_max(amax);
    if (amax > 0.0) sc = divide(amax, 448.0);
  }
#endif
  for (uint d = tid; d < pc.Di; d += WGS) {
    float x = LD(KI_TYPE, ki_d, pc.off_ki + t * pc.Di + d);
#if KC_TYPE == DT_FP8
    if (pc.has_scale != 0u) x = divide(x, sc);
#endif
    ST(KC_TYPE, kic_d, pc.off_kic + row * pc.Di + d, x);
  }
  if (pc.has_scale != 0u && tid == 0u) kis_d[pc.off_kis + row] = sc;
#endif
}
