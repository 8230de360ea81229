#version 450
#extension GL_GOOGLE_include_directive : require
// Combines the split partial results of attention.comp (SPLIT=1): for each (token, head)
// row, out = sum_s w_s o_s / sum_s w_s and lse = M + log(sum_s w_s) with
// w_s = exp(lse_s - M), M = max_s lse_s (a split that attended nothing has lse_s = -inf
// and weight 0). Fixed order over the splits. A_TYPE: dtype of out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_opart, off_lpart, off_out, off_lse;
  uint rows, S, D;
} pc;

layout(std430, binding = 1) readonly buffer OpBuf { float opart_d[]; };
layout(std430, binding = 2) readonly buffer LpBuf { float lpart_d[]; };
layout(std430, binding = 3) writeonly buffer OutBuf { STORAGE(A_TYPE) out_d[]; };
layout(std430, binding = 4) writeonly buffer LseBuf { float lse_d[]; };

void main() {
  uint row = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  if (row >= pc.rows) return;
  uint lp = pc.off_lpart + row * pc.S;
  float m = NEG_INF;
  for (uint s = 0u; s < pc.S; ++s) m = max(m, lpart_d[lp + s]);
  float sum = 0.0;
  if (m != NEG_INF)
    for (uint s = 0u; s < pc.S; ++s) sum += exp(lpart_d[lp + s] - m);
  for (uint d = tid; d < pc.D; d += WGS) {
    float acc = 0.0;
    if (sum > 0.0) {
      for (uint s = 0u; s < pc.S; ++s) {
        float w = exp(lpart_d[lp + s] - m);
        if (w > 0.0) acc += w * opart_d[pc.off_opart + (row * pc.S + s) * pc.D + d];
      }
      acc /= sum;
    }
    ST(A_TYPE, out_d, pc.off_out + row * pc.D + d, acc);
  }
  if (tid == 0u) lse_d[pc.off_lse + row] = sum > 0.0 ? m + log(sum) : NEG_INF;
}
