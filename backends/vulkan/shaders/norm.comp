#version 450
#extension GL_GOOGLE_include_directive : require
// rms_norm (LAYER=0) and layer_norm (LAYER=1) over the last dim: one workgroup per row,
// statistics in f32 with fixed-order reductions. X_TYPE: dtype of x and y; W_TYPE:
// dtype of w (and b).
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_x, off_w, off_b, off_y;
  uint M, N;
  float eps;
  uint flag;  // rms_norm: 1 = gemma (* (1 + w)); layer_norm: 1 = has bias
} pc;

layout(std430, binding = 1) readonly buffer XBuf { STORAGE(X_TYPE) x_d[]; };
layout(std430, binding = 2) readonly buffer WBuf { STORAGE(W_TYPE) w_d[]; };
layout(std430, binding = 3) readonly buffer BBuf { STORAGE(W_TYPE) b_d[]; };
layout(std430, binding = 4) writeonly buffer YBuf { STORAGE(X_TYPE) y_d[]; };

void main() {
  uint m = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  if (m >= pc.M) return;
  uint base = m * pc.N;
#if LAYER
  float sum = 0.0;
  for (uint n = tid; n < pc.N; n += WGS) sum += LD(X_TYPE, x_d, pc.off_x + base + n);
  float mean = wg_sum(sum) / float(pc.N);
  float var = 0.0;
  for (uint n = tid; n < pc.N; n += WGS) {
    float d = LD(X_TYPE, x_d, pc.off_x + base + n) - mean;
    var += d * d;
  }
  var = wg_sum(var) / float(pc.N);
  float inv = 1.0 / sqrt(var + pc.eps);
  for (uint n = tid; n < pc.N; n += WGS) {
    float v = (LD(X_TYPE, x_d, pc.off_x + base + n) - mean) * inv * LD(W_TYPE, w_d, pc.off_w + n);
    if (pc.flag != 0u) v += LD(W_TYPE, b_d, pc.off_b + n);
    ST(X_TYPE, y_d, pc.off_y + base + n, v);
  }
#else
  float ss = 0.0;
  for (uint n = tid; n < pc.N; n += WGS) {
    float v = LD(X_TYPE, x_d, pc.off_x + base + n);
    ss += v * v;
  }
  float inv = 1.0 / sqrt(wg_sum(ss) / float(pc.N) + pc.eps);
  for (uint n = tid; n < pc.N; n += WGS) {
    float w = LD(W_TYPE, w_d, pc.off_w + n);
    ST(X_TYPE, y_d, pc.off_y + base + n, LD(X_TYPE, x_d, pc.off_x + base + n) * inv * (pc.flag != 0u ? 1.0 + w : w));
  }
#endif
}
