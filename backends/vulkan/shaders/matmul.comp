#version 450
#extension GL_GOOGLE_include_directive : require
// matmul: y[M][N] = x[M][K] W[N][K]^T (+ bias[N]). 64x64 output tiles, K in steps of
// 16 through shared memory, each of the 256 invocations accumulating a 4x4 block in f32
// in a fixed order. A_TYPE: dtype of x, w, bias and y.
#define WGS 256
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_x, off_w, off_b, off_y;
  uint M, N, K, has_bias, tiles_n;
} pc;

layout(std430, binding = 1) readonly buffer XBuf { STORAGE(A_TYPE) x_d[]; };
layout(std430, binding = 2) readonly buffer WBuf { STORAGE(A_TYPE) w_d[]; };
layout(std430, binding = 3) readonly buffer BBuf { STORAGE(A_TYPE) b_d[]; };
layout(std430, binding = 4) writeonly buffer YBuf { STORAGE(A_TYPE) y_d[]; };

#define TILE 64
#define BK 16
shared float sx[BK][TILE];
shared float sw[BK][TILE];

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint tiles_m = (pc.M + TILE - 1u) / TILE;
  if (gid >= tiles_m * pc.tiles_n) return;
  uint m0 = (gid / pc.tiles_n) * TILE, n0 = (gid % pc.tiles_n) * TILE;
  uint tx = tid % 16u, ty = tid / 16u;
  float acc[4][4];
  [[unroll]] for (uint i = 0u; i < 4u; ++i)
    [[unroll]] for (uint j = 0u; j < 4u; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
    [[unroll]] for (uint r = 0u; r < 4u; ++r) {
      uint e = tid + r * WGS;
      uint rr = e / BK, kk = e % BK;
      uint k = k0 + kk;
      uint m = m0 + rr, n = n0 + rr;
      sx[kk][rr] = (m < pc.M && k < pc.K) ? LD(A_TYPE, x_d, pc.off_x + m * pc.K + k) : 0.0;
      sw[kk][rr] = (n < pc.N && k < pc.K) ? LD(A_TYPE, w_d, pc.off_w + n * pc.K + k) : 0.0;
    }
    barrier();
    [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
      float a[4], b[4];
      [[unroll]] for (uint i = 0u; i < 4u; ++i) a[i] = sx[kk][ty + 16u * i];
      [[unroll]] for (uint j = 0u; j < 4u; ++j) b[j] = sw[kk][tx + 16u * j];
      [[unroll]] for (uint i = 0u; i < 4u; ++i)
        [[unroll]] for (uint j = 0u; j < 4u; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    uint m = m0 + ty + 16u * i;
    if (m >= pc.M) continue;
    [[unroll]] for (uint j = 0u; j < 4u; ++j) {
      uint n = n0 + tx + 16u * j;
      if (n >= pc.N) continue;
      float v = acc[i][j];
      if (pc.has_bias != 0u) v += LD(A_TYPE, b_d, pc.off_b + n);
      ST(A_TYPE, y_d, pc.off_y + m * pc.N + n, v);
    }
  }
}
