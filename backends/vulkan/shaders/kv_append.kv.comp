#version 450
#extension GL_GOOGLE_include_directive : require
// kv_append, K and V part: one workgroup per new token copies its Hkv rows of K and V
// bit for bit into slot pos % Bs of page block_table[b][pos / Bs]. ELEM_BITS: 16 or 32.
// BDA=1: the caches are written through their buffer device addresses (push constants
// kc_addr, vc_addr) instead of bindings 6 and 7, for caches larger than
// maxStorageBufferRange; element indices into them are 64-bit.
#include "common.glsl"

#if ELEM_BITS == 16
#define RAW uint16_t
#else
#define RAW uint
#endif
#if BDA
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(buffer_reference, std430, buffer_reference_align = ELEM_BITS / 8) writeonly buffer RawRef { RAW v; };
#endif

layout(push_constant) uniform PushConstants {
#if BDA
  uint64_t kc_addr, vc_addr;  // (off_kc / off_vc unused: 0)
#endif
  uint off_k, off_v, off_bt, off_kvlen, off_cuq, off_kc, off_vc;
  uint T, Hkv, D, P, Bs, max_blocks, B;
} pc;

layout(std430, binding = 1) readonly buffer KBuf { RAW k_d[]; };
layout(std430, binding = 2) readonly buffer VBuf { RAW v_d[]; };
layout(std430, binding = 3) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 4) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 5) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 6) buffer KcBuf { RAW kc_d[]; };
layout(std430, binding = 7) buffer VcBuf { RAW vc_d[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"

void main() {
  uint t = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.max_blocks * pc.Bs;
  if (t == 0u && tid == 0u) seq_validate(maxkv, 1u, true);
  if (t >= pc.T || pc.B == 0u) return;
  uint b = seq_find(t);
  SeqInfo s = seq_info(b, maxkv);
  if (!s.ok || int(t) < s.q0 || int(t) >= s.q0 + s.qlen) return;
  uint pos = uint(s.pos0 + (int(t) - s.q0));
  int page = bt_d[pc.off_bt + b * pc.max_blocks + pos / pc.Bs];
  if (page < 0 || uint(page) >= pc.P) {
    if (tid == 0u) flag_error(ERR_BLOCK_TABLE);
    return;
  }
  uint slot = pos % pc.Bs;
  uint n = pc.Hkv * pc.D;
  for (uint e = tid; e < n; e += WGS) {
    uint h = e / pc.D, d = e % pc.D;
#if BDA
    uint64_t dst = ((uint64_t(page) * pc.Hkv + h) * pc.Bs + slot) * pc.D + d;
    RawRef(pc.kc_addr + dst * uint64_t(ELEM_BITS / 8)).v = k_d[pc.off_k + t * n + e];
    RawRef(pc.vc_addr + dst * uint64_t(ELEM_BITS / 8)).v = v_d[pc.off_v + t * n + e];
#else
    uint dst = ((uint(page) * pc.Hkv + h) * pc.Bs + slot) * pc.D + d;
    kc_d[pc.off_kc + dst] = k_d[pc.off_k + t * n + e];
    vc_d[pc.off_vc + dst] = v_d[pc.off_v + t * n + e];
#endif
  }
}
