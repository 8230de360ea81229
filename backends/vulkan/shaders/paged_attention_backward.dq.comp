#version 450
#extension GL_GOOGLE_include_directive : require
// dq of sparse_block_attention_backward (sparse = 1) and dense_attention_backward: one
// workgroup per (token t, query head h) walks the row's attended set (paged_walk.glsl)
// in tiles of up to WGS slots: each invocation scores one slot (p, ds), then each owns
// its dims of dq = scale * sum_s ds_s * k_s, in slot order. Also writes delta =
// dot(dout, out) of the row to the workspace for the slab pass and validates the index
// data as the forward does. A row whose lse is -inf gets dq = 0. A_TYPE: dtype of q, the
// caches, dout and out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_q, off_k, off_v, off_bt, off_kvlen, off_cuq, off_idx, off_dout, off_out, off_lse, off_dq, ws_delta;
  uint T, Hq, Hkv, D, P, Bs, max_blocks, B, Qb, NQ, K, Hs, sparse;
  float scale;
} pc;

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 3) readonly buffer VBuf { STORAGE(A_TYPE) v_d[]; };
layout(std430, binding = 4) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 5) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 6) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 7) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 8) readonly buffer DoutBuf { STORAGE(A_TYPE) dout_d[]; };
layout(std430, binding = 9) readonly buffer OutBuf { STORAGE(A_TYPE) out_d[]; };
layout(std430, binding = 10) readonly buffer LseBuf { float lse_d[]; };
layout(std430, binding = 11) writeonly buffer DqBuf { float dq_d[]; };
layout(std430, binding = 12) writeonly buffer WsBuf { uint ws[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"
#include "table_check.glsl"

#define K_AT(i) LD(A_TYPE, k_d, pc.off_k + (i))
#define V_AT(i) LD(A_TYPE, v_d, pc.off_v + (i))
#define Q_LOAD(i) LD(A_TYPE, q_d, i)
#define DO_LOAD(i) LD(A_TYPE, dout_d, i)
#include "attn_backward.glsl"

shared float sh_ds[WGS];
shared uint sh_kv[WGS];
shared float sh_delta;

float row_lse, row_delta;
float acc[DPT];

// Tokens [c * Bs, s_end) of logical block c on `page` for the row's KV head.
void visit_block(uint pass, uint page, uint c, uint s_end) {
  uint tid = gl_LocalInvocationID.x;
  uint g = (wg_linear() % pc.Hq) / (pc.Hq / pc.Hkv);
  uint s0 = c * pc.Bs;
  uint base = (page * pc.Hkv + g) * pc.Bs * pc.D;
  for (uint j0 = 0u; s0 + j0 < s_end; j0 += WGS) {
    uint j = j0 + tid;
    float p = 0.0, ds = 0.0;
    if (s0 + j < s_end) bw_p_ds(base + j * pc.D, pc.D, pc.scale, row_lse, row_delta, p, ds);
    sh_ds[tid] = pc.scale * ds;
    sh_kv[tid] = base + j * pc.D;
    barrier();
    uint n = min(uint(WGS), s_end - s0 - j0);
    [[unroll]] for (uint x = 0u; x < DPT; ++x) {
      uint d = tid + x * WGS;
      if (d < pc.D) {
        float a = acc[x];
        for (uint i = 0u; i < n; ++i) a += sh_ds[i] * K_AT(sh_kv[i] + d);
        acc[x] = a;
      }
    }
    barrier();
  }
}

#include "paged_walk.glsl"

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  walk_validate(gid);
  if (gid >= pc.T * pc.Hq) return;
  uint t = gid / pc.Hq, h = gid % pc.Hq;
  uint g = h / (pc.Hq / pc.Hkv);
  uint row = t * pc.Hq + h;
  bw_load_row(pc.off_q + row * pc.D, pc.off_dout + row * pc.D, pc.D);
  if (tid == 0u) {
    float dl = 0.0;
    for (uint d = 0u; d < pc.D; ++d) dl += bw_do[d] * LD(A_TYPE, out_d, pc.off_out + row * pc.D + d);
    sh_delta = dl;
  }
  barrier();
  row_delta = sh_delta;
  row_lse = lse_d[pc.off_lse + row];
  [[unroll]] for (uint x = 0u; x < DPT; ++x) acc[x] = 0.0;
  if (h == 0u) walk_check_row(t);
  if (row_lse != NEG_INF) walk_attended(0u, t, g);
  [[unroll]] for (uint x = 0u; x < DPT; ++x) {
    uint d = tid + x * WGS;
    if (d < pc.D) dq_d[pc.off_dq + row * pc.D + d] = acc[x];
  }
  if (tid == 0u) ws[pc.ws_delta + row] = floatBitsToUint(row_delta);
  flag_cut_loops();
}
