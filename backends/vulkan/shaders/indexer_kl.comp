#version 450
#extension GL_GOOGLE_include_directive : require
// indexer_kl, per (token t, selection head g): one workgroup walks the token set S(t, g)
// (paged_walk.glsl: stage sparse the selected blocks, stage dense every causal token)
// twice in tiles of up to WGS slots. Pass 0: the student's max m and sum l over S
// (online, in slot order). Pass 1: at each slot the target p (indexer_kl.glsl) and the
// student u = exp(logit - m) / l give kl += p (log p - log u) (0 log 0 = 0) and the
// logit gradient w (u - p), w = dkl * scale_i, which each invocation sums into its dims
// of dqi in slot order. Writes kl, dqi and m, l (to the workspace, for the per-page dki
// pass); an empty S gives kl = 0, dqi = 0. Validates the index data as the forward
// attention does. QI_TYPE: qi; KI_TYPE: ki_cache; A_TYPE: q and k_cache.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_qi, off_ki, off_q, off_k, off_lse, off_bt, off_kvlen, off_cuq, off_idx, off_dkl, off_kl, off_dqi;
  uint ws_lse_u;
  uint T, Hq, Hkv, D, P, Bs, max_blocks, B, Qb, NQ, K, Hs, Di, sparse, has_dkl;
  float scale, scale_i;
} pc;

layout(std430, binding = 1) readonly buffer QiBuf { STORAGE(QI_TYPE) qi_d[]; };
layout(std430, binding = 2) readonly buffer KiBuf { STORAGE(KI_TYPE) ki_d[]; };
layout(std430, binding = 3) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 4) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 5) readonly buffer LseBuf { float lse_d[]; };
layout(std430, binding = 6) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 7) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 8) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 9) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 10) readonly buffer DklBuf { float dkl_d[]; };
layout(std430, binding = 11) writeonly buffer KlBuf { float kl_d[]; };
layout(std430, binding = 12) writeonly buffer DqiBuf { float dqi_d[]; };
layout(std430, binding = 13) writeonly buffer WsBuf { uint ws[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"
#include "table_check.glsl"
#include "indexer_kl.glsl"

#define DPT_I (MAX_DI / WGS)

shared float sh_c[WGS];
shared uint sh_row[WGS];

uint row_t, row_g;
float lse_m, lse_l;  // pass 0: running max and sum of the student's logits
float w_row;         // pass 1
float kl_acc;
float acc[DPT_I];

void visit_block(uint pass, uint page, uint c, uint s_end) {
  uint tid = gl_LocalInvocationID.x;
  uint s0 = c * pc.Bs;
  for (uint j0 = 0u; s0 + j0 < s_end; j0 += WGS) {
    uint j = j0 + tid;
    bool valid = s0 + j < s_end;
    uint n = min(uint(WGS), s_end - s0 - j0);
    float logit = valid ? kl_logit(page, j) : NEG_INF;
    if (pass == 0u) {
      float tmax = wg_max(logit);
      if (tmax == NEG_INF) continue;  // uniform: nothing to add
      float m_new = max(lse_m, tmax);
      lse_l = lse_l * exp(lse_m - m_new) + wg_sum(valid ? exp(logit - m_new) : 0.0);
      lse_m = m_new;
      continue;
    }
    float term = 0.0, coeff = 0.0;
    if (valid) {
      float p = kl_target(row_t, row_g, page, j);
      // u as exp(logit - m) / l: a single slot gives u = 1 exactly (no log, which is
      // approximate on some drivers, in the way).
      float u = exp(logit - lse_m) / lse_l;
      if (p != 0.0) term = p * (log(p) - (logit - lse_m - log(lse_l)));
      coeff = w_row * (u - p);
    }
    sh_c[tid] = coeff;
    sh_row[tid] = pc.off_ki + (page * pc.Bs + j) * pc.Di;
    kl_acc += wg_sum(term);  // (its barriers also publish sh_c / sh_row)
    [[unroll]] for (uint x = 0u; x < DPT_I; ++x) {
      uint d = tid + x * WGS;
      if (d < pc.Di) {
        float a = acc[x];
        for (uint i = 0u; i < n; ++i) a += sh_c[i] * LD(KI_TYPE, ki_d, sh_row[i] + d);
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
  if (gid >= pc.T * pc.Hs) return;
  row_t = gid / pc.Hs;
  row_g = gid % pc.Hs;
  kl_load_qi(row_t, row_g);
  if (row_g == 0u) walk_check_row(row_t);
  lse_m = NEG_INF;
  lse_l = 0.0;
  walk_attended(0u, row_t, row_g);
  w_row = (pc.has_dkl != 0u ? dkl_d[pc.off_dkl + gid] : 1.0) * pc.scale_i;
  kl_acc = 0.0;
  [[unroll]] for (uint x = 0u; x < DPT_I; ++x) acc[x] = 0.0;
  if (lse_l > 0.0) walk_attended(1u, row_t, row_g);
  [[unroll]] for (uint x = 0u; x < DPT_I; ++x) {
    uint d = tid + x * WGS;
    if (d < pc.Di) dqi_d[pc.off_dqi + gid * pc.Di + d] = acc[x];
  }
  if (tid == 0u) {
    kl_d[pc.off_kl + gid] = kl_acc;
    ws[pc.ws_lse_u + 2u * gid] = floatBitsToUint(lse_m);
    ws[pc.ws_lse_u + 2u * gid + 1u] = floatBitsToUint(lse_l);
  }
  flag_cut_loops();
}
