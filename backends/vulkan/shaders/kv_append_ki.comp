#version 450
#extension GL_GOOGLE_include_directive : require
// kv_append, indexer-key part: one workgroup per new token converts its Di indexer key
// values (KI_TYPE) to the cache dtype (KC_TYPE) in slot pos % Bs of its page. fp8 keys
// with a scale tensor store x / (amax / 448) and the scale (1 for an all-zero row); the
// two divisions are done in double when F64 is set, so they round exactly as the host's.
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
layout(std430, binding = 6) buffer KisBuf { float kis_d[]; };

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

void main() {
  uint t = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.max_blocks * pc.Bs;
  if (t >= pc.T || pc.B == 0u) return;
  uint b = seq_find(t);
  SeqInfo s = seq_info(b, maxkv);
  if (!s.ok || int(t) < s.q0 || int(t) >= s.q0 + s.qlen) return;  // flagged by kv_append_kv
  uint pos = uint(s.pos0 + (int(t) - s.q0));
  int page = bt_d[pc.off_bt + b * pc.max_blocks + pos / pc.Bs];
  if (page < 0 || uint(page) >= pc.P) return;  // flagged by kv_append_kv
  uint row = uint(page) * pc.Bs + pos % pc.Bs;
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
}
