#version 450
#extension GL_GOOGLE_include_directive : require
// scatter_visual: one workgroup per token row t. If tokens[t] is the placeholder, its
// rank among the placeholders (counted by the workgroup over tokens[0..t)) picks the
// row of vis that replaces x[t]. Workgroup 0 checks the total against Nv.
// V_TYPE: dtype of vis; X_TYPE: of x.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_tokens, off_vis, off_x;
  uint T, Nv, H;
  int placeholder;
} pc;

layout(std430, binding = 1) readonly buffer TokBuf { int tok_d[]; };
layout(std430, binding = 2) readonly buffer VisBuf { STORAGE(V_TYPE) vis_d[]; };
layout(std430, binding = 3) buffer XBuf { STORAGE(X_TYPE) x_d[]; };

uint count_placeholders(uint end) {
  uint n = 0u;
  for (uint i = gl_LocalInvocationID.x; i < end; i += WGS)
    n += tok_d[pc.off_tokens + i] == pc.placeholder ? 1u : 0u;
  return wg_sum_u(n);
}

void main() {
  uint t = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  if (t == 0u) {
    uint total = count_placeholders(pc.T);
    if (tid == 0u && total != pc.Nv) flag_error(ERR_PLACEHOLDERS);
  }
  if (t >= pc.T || tok_d[pc.off_tokens + t] != pc.placeholder) return;
  uint rank = count_placeholders(t);
  if (rank >= pc.Nv) return;
  for (uint h = tid; h < pc.H; h += WGS)
    ST(X_TYPE, x_d, pc.off_x + t * pc.H + h, LD(V_TYPE, vis_d, pc.off_vis + rank * pc.H + h));
}
