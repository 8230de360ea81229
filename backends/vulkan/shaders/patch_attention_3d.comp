#version 450
#extension GL_GOOGLE_include_directive : require
// patch_attention_3d: bidirectional attention inside windows of `window` temporal
// patches of each visual item. One workgroup per (token i, head h). A_TYPE: dtype of
// q, k, v and out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_q, off_k, off_v, off_items, off_out, off_lse;
  uint N, H, D, n_items, window;
  float scale;
} pc;

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 3) readonly buffer VBuf { STORAGE(A_TYPE) v_d[]; };
layout(std430, binding = 4) readonly buffer ItemBuf { int items_d[]; };
layout(std430, binding = 5) writeonly buffer OutBuf { STORAGE(A_TYPE) out_d[]; };
layout(std430, binding = 6) writeonly buffer LseBuf { float lse_d[]; };

#define K_AT(i) LD(A_TYPE, k_d, pc.off_k + (i))
#define V_AT(i) LD(A_TYPE, v_d, pc.off_v + (i))
#include "attn_core.glsl"

#include "patch_items.glsl"

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  validate_items(gid);
  if (gid >= pc.N * pc.H) return;
  uint i = gid / pc.H, h = gid % pc.H;
  attn_begin(pc.off_q + (i * pc.H + h) * pc.D, pc.D, pc.scale);

  uint w_begin, w_end;
  patch_window(i, w_begin, w_end);
  for (uint s0 = w_begin; s0 < w_end; s0 += WGS) {
    uint s = s0 + tid;
    attn_tile(s < w_end, (s * pc.H + h) * pc.D, min(uint(WGS), w_end - s0));
  }
  attn_finish();
  uint o = pc.off_out + (i * pc.H + h) * pc.D;
  [[unroll]] for (uint j = 0u; j < DPT; ++j) {
    uint d = tid + j * WGS;
    if (d < pc.D) ST(A_TYPE, out_d, o + d, attn_out(j));
  }
  if (tid == 0u) lse_d[pc.off_lse + i * pc.H + h] = attn_lse();
}
