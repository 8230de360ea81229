#version 450
#extension GL_GOOGLE_include_directive : require
// argmax over the last dim: one workgroup per row; NaN is never the maximum, ties (and
// -0 == +0) go to the lowest index, an all-NaN row gives 0. A_TYPE: dtype of x.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_x, off_idx;
  uint M, N;
} pc;

layout(std430, binding = 1) readonly buffer XBuf { STORAGE(A_TYPE) x_d[]; };
layout(std430, binding = 2) writeonly buffer IdxBuf { int idx_d[]; };

shared float sh_v[WGS];
shared uint sh_i[WGS];

// True when (v, i) beats (bv, bi); INVALID indices never win.
bool better(float v, uint i, float bv, uint bi) {
  if (i == INVALID) return false;
  if (bi == INVALID) return true;
  return v > bv || (v == bv && i < bi);
}

void main() {
  uint m = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  if (m >= pc.M) return;
  float bv = 0.0;
  uint bi = INVALID;
  for (uint n = tid; n < pc.N; n += WGS) {
    float v = LD(A_TYPE, x_d, pc.off_x + m * pc.N + n);
    if ((floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u) continue;  // NaN
    if (better(v, n, bv, bi)) { bv = v; bi = n; }
  }
  sh_v[tid] = bv;
  sh_i[tid] = bi;
  barrier();
  for (uint step = WGS / 2u; step > 0u; step >>= 1) {
    if (tid < step && better(sh_v[tid + step], sh_i[tid + step], sh_v[tid], sh_i[tid])) {
      sh_v[tid] = sh_v[tid + step];
      sh_i[tid] = sh_i[tid + step];
    }
    barrier();
  }
  if (tid == 0u) idx_d[pc.off_idx + m] = sh_i[0] == INVALID ? 0 : int(sh_i[0]);
}
