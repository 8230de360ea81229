#version 450
#extension GL_GOOGLE_include_directive : require
// rope (ROPE3D=0) and rope_3d (ROPE3D=1), neox style: one invocation per rotated pair
// (j, j + half) or per passed-through dim. The inverse frequencies come from the host
// (computed in double like the reference); with F64 the angle, its sine and cosine and
// the rotation are computed in double, else in f32. A_TYPE: dtype of x and y (y may
// alias x: each invocation reads its pair before writing it).
#if F64
#extension GL_ARB_gpu_shader_fp64 : require
#endif
#define WGS 256
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_x, off_pos, off_y;
  uint T, H, D;
  uint half_dim;  // rotated pairs per head (rope: rotary_dim/2; rope_3d: 3 * npair)
  uint npair;     // rope_3d: frequencies per axis
} pc;

layout(std430, binding = 1) readonly buffer XBuf { STORAGE(A_TYPE) x_d[]; };
layout(std430, binding = 2) readonly buffer PosBuf { int pos_d[]; };
layout(std430, binding = 3) writeonly buffer YBuf { STORAGE(A_TYPE) y_d[]; };
#if F64
layout(std430, binding = 4) readonly buffer FreqBuf { double freq_d[]; };
#define REAL double
#else
layout(std430, binding = 4) readonly buffer FreqBuf { float freq_d[]; };
#define REAL float
#endif

#if F64
// sin and cos in double: reduction by pi/2 (two-part constant), Taylor polynomials on
// [-pi/4, pi/4] (error far below f32 resolution).
void sincos_real(double x, out double s, out double c) {
  const double two_over_pi = 0.63661977236758134308LF;
  const double pio2_hi = 1.5707963267948966LF;
  const double pio2_lo = 6.123233995736766e-17LF;
  double k = round(x * two_over_pi);
  double r = (x - k * pio2_hi) - k * pio2_lo;
  double r2 = r * r;
  double sn = r * (1.0LF + r2 * (-1.0LF / 6.0LF + r2 * (1.0LF / 120.0LF + r2 * (-1.0LF / 5040.0LF +
              r2 * (1.0LF / 362880.0LF + r2 * (-1.0LF / 39916800.0LF + r2 * (1.0LF / 6227020800.0LF +
              r2 * (-1.0LF / 1307674368000.0LF + r2 * (1.0LF / 355687428096000.0LF)))))))));
  double cs = 1.0LF + r2 * (-0.5LF + r2 * (1.0LF / 24.0LF + r2 * (-1.0LF / 720.0LF + r2 * (1.0LF / 40320.0LF +
              r2 * (-1.0LF / 3628800.0LF + r2 * (1.0LF / 479001600.0LF + r2 * (-1.0LF / 87178291200.0LF +
              r2 * (1.0LF / 20922789888000.0LF))))))));
  int q = int(mod(k, 4.0LF));
  if (q == 0) { s = sn; c = cs; }
  else if (q == 1) { s = cs; c = -sn; }
  else if (q == 2) { s = -sn; c = -cs; }
  else { s = -cs; c = sn; }
}
#else
void sincos_real(float x, out float s, out float c) {
  const float two_pi = 6.28318530717958647692;
  float r = x - two_pi * round(x / two_pi);
  s = sin(r);
  c = cos(r);
}
#endif

void main() {
  uint e = wg_linear() * WGS + gl_LocalInvocationID.x;
  uint per_head = pc.D - pc.half_dim;  // pairs + passed-through dims
  if (e >= pc.T * pc.H * per_head) return;
  uint row = e / per_head, j = e % per_head;
  uint t = row / pc.H;
  uint base = row * pc.D;
  if (j >= pc.half_dim) {  // dims 2*half .. D-1 pass through
    uint d = pc.half_dim + j;
    ST(A_TYPE, y_d, pc.off_y + base + d, LD(A_TYPE, x_d, pc.off_x + base + d));
    return;
  }
#if ROPE3D
  uint axis = j / pc.npair;
  REAL angle = REAL(pos_d[pc.off_pos + t * 3u + axis]) * freq_d[j % pc.npair];
#else
  REAL angle = REAL(pos_d[pc.off_pos + t]) * freq_d[j];
#endif
  REAL s, c;
  sincos_real(angle, s, c);
  REAL x0 = REAL(LD(A_TYPE, x_d, pc.off_x + base + j));
  REAL x1 = REAL(LD(A_TYPE, x_d, pc.off_x + base + j + pc.half_dim));
  ST(A_TYPE, y_d, pc.off_y + base + j, float(x0 * c - x1 * s));
  ST(A_TYPE, y_d, pc.off_y + base + j + pc.half_dim, float(x1 * c + x0 * s));
}
