#version 450
#extension GL_GOOGLE_include_directive : require
// patch_attention_3d_backward: one workgroup per (token i, head h) owns the gradient rows
// dq[i][h], dk[i][h] and dv[i][h]. Attention is bidirectional inside a window, so row i's
// queries and keys meet the same tokens j of its window: in tiles of up to WGS tokens each
// invocation takes one j and scores both directions (i as query against key j, j as query
// against key i), then each invocation sums its own dims in token order:
// dq_i = scale * sum_j ds(i, j) k_j, dk_i = scale * sum_j ds(j, i) q_j,
// dv_i = sum_j p(j, i) dout_j. A query row whose lse is -inf contributes nothing. Tokens
// outside every valid window (bad items, flagged) get 0. A_TYPE: dtype of q, k, v, dout,
// out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_q, off_k, off_v, off_items, off_dout, off_out, off_lse, off_dq, off_dk, off_dv;
  uint N, H, D, n_items, window;
  float scale;
} pc;

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 3) readonly buffer VBuf { STORAGE(A_TYPE) v_d[]; };
layout(std430, binding = 4) readonly buffer ItemBuf { int items_d[]; };
layout(std430, binding = 5) readonly buffer DoutBuf { STORAGE(A_TYPE) dout_d[]; };
layout(std430, binding = 6) readonly buffer OutBuf { STORAGE(A_TYPE) out_d[]; };
layout(std430, binding = 7) readonly buffer LseBuf { float lse_d[]; };
layout(std430, binding = 8) writeonly buffer DqBuf { float dq_d[]; };
layout(std430, binding = 9) writeonly buffer DkBuf { float dk_d[]; };
layout(std430, binding = 10) writeonly buffer DvBuf { float dv_d[]; };

#define K_AT(i) LD(A_TYPE, k_d, pc.off_k + (i))
#define V_AT(i) LD(A_TYPE, v_d, pc.off_v + (i))
#define Q_LOAD(i) LD(A_TYPE, q_d, i)
#define DO_LOAD(i) LD(A_TYPE, dout_d, i)
#include "attn_backward.glsl"
#include "patch_items.glsl"

shared float sh_k[MAX_D];  // k and v of row i
shared float sh_v[MAX_D];
shared float sh_dq[WGS];   // per token j of the tile: scale * ds(i, j)
shared float sh_dk[WGS];   // scale * ds(j, i)
shared float sh_dv[WGS];   // p(j, i)
shared float sh_delta;

// delta = dot(dout, out) of row `row` (element offset of its first element).
float row_delta(uint row) {
  float dl = 0.0;
  for (uint d = 0u; d < pc.D; ++d) dl += LD(A_TYPE, dout_d, pc.off_dout + row + d) * LD(A_TYPE, out_d, pc.off_out + row + d);
  return dl;
}

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  validate_items(gid);
  if (gid >= pc.N * pc.H) return;
  uint i = gid / pc.H, h = gid % pc.H;
  uint row = (i * pc.H + h) * pc.D;
  bw_load_row(pc.off_q + row, pc.off_dout + row, pc.D);
  for (uint d = tid; d < pc.D; d += WGS) {
    sh_k[d] = K_AT(row + d);
    sh_v[d] = V_AT(row + d);
  }
  if (tid == 0u) sh_delta = row_delta(row);
  barrier();
  float lse_i = lse_d[pc.off_lse + i * pc.H + h], delta_i = sh_delta;
  float aq[DPT], ak[DPT], av[DPT];
  [[unroll]] for (uint x = 0u; x < DPT; ++x) {
    aq[x] = 0.0;
    ak[x] = 0.0;
    av[x] = 0.0;
  }
  uint w_begin, w_end;
  patch_window(i, w_begin, w_end);
  for (uint s0 = w_begin; s0 < w_end; s0 += WGS) {
    uint j = s0 + tid;
    float dq_c = 0.0, dk_c = 0.0, dv_c = 0.0;
    if (j < w_end) {
      uint rj = (j * pc.H + h) * pc.D;
      if (lse_i != NEG_INF) {
        float p, ds;
        bw_p_ds(rj, pc.D, pc.scale, lse_i, delta_i, p, ds);
        dq_c = pc.scale * ds;
      }
      float lse_j = lse_d[pc.off_lse + j * pc.H + h];
      if (lse_j != NEG_INF) {
        float qk = 0.0, dv = 0.0;
        for (uint d = 0u; d < pc.D; ++d) {
          qk += LD(A_TYPE, q_d, pc.off_q + rj + d) * sh_k[d];
          dv += LD(A_TYPE, dout_d, pc.off_dout + rj + d) * sh_v[d];
        }
        float p = exp(pc.scale * qk - lse_j);
        dk_c = pc.scale * (p * (dv - row_delta(rj)));
        dv_c = p;
      }
    }
    sh_dq[tid] = dq_c;
    sh_dk[tid] = dk_c;
    sh_dv[tid] = dv_c;
    barrier();
    uint n = min(uint(WGS), w_end - s0);
    [[unroll]] for (uint x = 0u; x < DPT; ++x) {
      uint d = tid + x * WGS;
      if (d < pc.D) {
        float a = aq[x], b = ak[x], c = av[x];
        for (uint m = 0u; m < n; ++m) {
          uint rm = ((s0 + m) * pc.H + h) * pc.D + d;
          a += sh_dq[m] * K_AT(rm);
          b += sh_dk[m] * LD(A_TYPE, q_d, pc.off_q + rm);
          c += sh_dv[m] * LD(A_TYPE, dout_d, pc.off_dout + rm);
        }
        aq[x] = a;
        ak[x] = b;
        av[x] = c;
      }
    }
    barrier();
  }
  [[unroll]] for (uint x = 0u; x < DPT; ++x) {
    uint d = tid + x * WGS;
    if (d < pc.D) {
      dq_d[pc.off_dq + row + d] = aq[x];
      dk_d[pc.off_dk + row + d] = ak[x];
      dv_d[pc.off_dv + row + d] = av[x];
    }
  }
  flag_cut_loops();
}
