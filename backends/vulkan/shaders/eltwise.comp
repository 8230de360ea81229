#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise ops, one invocation per element: OP 0 add (y = a + b), 1 swiglu
// (y = silu(a) * b, a = gate, b = up), 2 gelu (y = gelu(a), erf form). A_TYPE: dtype
// of every tensor.
#define WGS 256
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_a, off_b, off_y;
  uint n;
} pc;

layout(std430, binding = 1) readonly buffer ABuf { STORAGE(A_TYPE) a_d[]; };
layout(std430, binding = 2) readonly buffer BBuf { STORAGE(A_TYPE) b_d[]; };
layout(std430, binding = 3) writeonly buffer YBuf { STORAGE(A_TYPE) y_d[]; };

// erfc with fractional error < 1.2e-7 everywhere (Numerical Recipes' erfcc), so that
// gelu keeps its relative accuracy for negative x, where 1 + erf(x) cancels.
float erfc_approx(float x) {
  float z = abs(x);
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
            t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
            t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0.0 ? r : 2.0 - r;
}

void main() {
  uint i = wg_linear() * WGS + gl_LocalInvocationID.x;
  if (i >= pc.n) return;
  float a = LD(A_TYPE, a_d, pc.off_a + i);
#if OP == 0
  float y = a + LD(A_TYPE, b_d, pc.off_b + i);
#elif OP == 1
  float y = a / (1.0 + exp(-a)) * LD(A_TYPE, b_d, pc.off_b + i);
#else
  float y = 0.5 * a * erfc_approx(-a * 0.70710678118654752440);
#endif
  ST(A_TYPE, y_d, pc.off_y + i, y);
}
