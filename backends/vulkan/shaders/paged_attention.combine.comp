#version 450
#extension GL_GOOGLE_include_directive : require
// Combines the split partial results of paged_attention.comp / paged_attention.gqa.comp (SPLIT=1):
// for each (token, head) row, out = sum_s w_s o_s / sum_s w_s and lse = M + log(sum_s w_s)
// with w_s = exp(lse_s - M), M = max_s lse_s (a split that attended nothing has
// lse_s = -inf and weight 0; a split with a non-finite row has lse_s = NaN, which makes
// the row's out and lse NaN: docs/spec.md, "Non-finite inputs"). One workgroup per row: the weights are computed once into
// shared memory, then each invocation sums its output dims over the splits with four
// independent accumulators (loads in flight). Fixed order throughout, so results are
// bitwise reproducible. A_TYPE: dtype of out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_opart, off_lpart, off_out, off_lse;
  uint rows, S, D;
} pc;

layout(std430, binding = 1) readonly buffer OpBuf { float opart_d[]; };
layout(std430, binding = 2) readonly buffer LpBuf { float lpart_d[]; };
layout(std430, binding = 3) writeonly buffer OutBuf { STORAGE(A_TYPE) out_d[]; };
layout(std430, binding = 4) writeonly buffer LseBuf { float lse_d[]; };

#define MAX_S 512
shared float sh_w[MAX_S];

// Weight of split s (from shared memory for the first MAX_S splits).
float weight(uint lp, uint s, float m) {
  if (s < MAX_S) return sh_w[s];
  float l = lpart_d[lp + s];
  return l == NEG_INF ? 0.0 : exp(l - m);
}

void main() {
  uint row = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  if (row >= pc.rows) return;  // uniform
  uint lp = pc.off_lpart + row * pc.S;
  float m = NEG_INF, nan_part = 0.0;
  for (uint s = tid; s < pc.S; s += WGS) {
    float l = lpart_d[lp + s];
    if (isnan(l)) nan_part = 1.0;
    else m = max(m, l);
  }
  m = wg_max(m);
  if (wg_max(nan_part) > 0.0) {  // uniform
    uint o = pc.off_out + row * pc.D;
    for (uint d = tid; d < pc.D; d += WGS) ST(A_TYPE, out_d, o + d, QNAN);
    if (tid == 0u) lse_d[pc.off_lse + row] = QNAN;
    return;
  }
  float part = 0.0;
  if (m != NEG_INF) {
    for (uint s = tid; s < pc.S; s += WGS) {
      float l = lpart_d[lp + s];
      float w = l == NEG_INF ? 0.0 : exp(l - m);
      if (s < MAX_S) sh_w[s] = w;
      part += w;
    }
  }
  float sum = wg_sum(part);  // its barriers also publish sh_w
  float inv = sum > 0.0 ? 1.0 / sum : 0.0;
  uint ob = pc.off_opart + row * pc.S * pc.D;
  for (uint d = tid; d < pc.D; d += WGS) {
    float acc = 0.0;
    if (sum > 0.0) {
      float a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
      uint s = 0u;
      for (; s + 4u <= pc.S; s += 4u) {
        float w0 = weight(lp, s, m), w1 = weight(lp, s + 1u, m);
        float w2 = weight(lp, s + 2u, m), w3 = weight(lp, s + 3u, m);
        // Every split here wrote a finite partial (0 when it attended nothing), so the
        // loads need no guard and stay in flight together.
        a0 += w0 * opart_d[ob + s * pc.D + d];
        a1 += w1 * opart_d[ob + (s + 1u) * pc.D + d];
        a2 += w2 * opart_d[ob + (s + 2u) * pc.D + d];
        a3 += w3 * opart_d[ob + (s + 3u) * pc.D + d];
      }
      for (; s < pc.S; ++s) {
        float w = weight(lp, s, m);
        a0 += w * opart_d[ob + s * pc.D + d];
      }
      acc = ((a0 + a1) + (a2 + a3)) * inv;
    }
    ST(A_TYPE, out_d, pc.off_out + row * pc.D + d, acc);
  }
  if (tid == 0u) lse_d[pc.off_lse + row] = sum > 0.0 ? m + log(sum) : NEG_INF;
}
