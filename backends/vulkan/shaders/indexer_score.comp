#version 450
#extension GL_GOOGLE_include_directive : require
// indexer_score: one workgroup per (query block n, indexer head j, KV block c); the
// invocations score the block's tokens, the workgroup pools them (max or log-sum-exp)
// per query, and the query block keeps the maximum. QI_TYPE: dtype of qi; KI_TYPE:
// dtype of ki_cache (f32, bf16, fp8_e4m3, or fp4_e2m1x2: NVFP4 keys, Di/2 bytes per row,
// whose ki_scale is [P][Bs][Di/16] e4m3 bytes, one per group of 16 dims: each group's
// partial dot product of q with the E2M1 values is multiplied by its scale).
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_qi, off_ki, off_kis, off_bt, off_kvlen, off_cuq, off_out;
  uint T, Hi, Di, P, Bs, mb_table, mb_out, B, Qb, NQ, has_scale, pool_lse;
  float scale;
} pc;

layout(std430, binding = 1) readonly buffer QiBuf { STORAGE(QI_TYPE) qi_d[]; };
layout(std430, binding = 2) readonly buffer KiBuf { STORAGE(KI_TYPE) ki_d[]; };
#if KI_TYPE == DT_FP4
layout(std430, binding = 3) readonly buffer KisBuf { uint kis_b[]; };  // e4m3 group scales
#else
layout(std430, binding = 3) readonly buffer KisBuf { float kis_d[]; };
#endif
layout(std430, binding = 4) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 5) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 6) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 7) writeonly buffer OutBuf { float out_d[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"

#define MAX_DI 256
shared float sh_qi[MAX_DI];

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.mb_table * pc.Bs;
  if (gid == 0u && tid == 0u) {
    if (seq_validate(maxkv, pc.Qb, true) != pc.NQ) flag_error(ERR_NQ);
  }
  if (gid >= pc.NQ * pc.Hi * pc.mb_out) return;
  uint c = gid % pc.mb_out;
  uint j = (gid / pc.mb_out) % pc.Hi;
  uint n = gid / (pc.mb_out * pc.Hi);

  float result = NEG_INF;
  uint b;
  SeqInfo s;
  int p0, p1;
  bool ok = seq_qblock(n, maxkv, pc.Qb, b, s, p0, p1);
  uint s0 = c * pc.Bs;
  if (ok && s0 < uint(s.kvl) && int(s0) <= p1) {
    int page = bt_d[pc.off_bt + b * pc.mb_table + c];
    if (page < 0 || uint(page) >= pc.P) {
      if (tid == 0u) flag_error(ERR_BLOCK_TABLE);
    } else {
      uint ntok = min(pc.Bs, uint(s.kvl) - s0);  // valid slots of the block
      uint krow0 = uint(page) * pc.Bs;
      for (int p = max(p0, int(s0)); p <= p1; ++p) {
        uint t = uint(s.q0 + (p - s.pos0));
        for (uint d = tid; d < pc.Di; d += WGS) sh_qi[d] = LD(QI_TYPE, qi_d, pc.off_qi + (t * pc.Hi + j) * pc.Di + d);
        barrier();
        uint lim = min(ntok, uint(p) - s0 + 1u);  // causal: s <= p
        float qm = NEG_INF, qsum = 0.0;
        bool qnan = false;  // a valid NaN logit: the pooled value is NaN (docs/spec.md)
        for (uint r0 = 0u; r0 < lim; r0 += WGS) {
          uint r = r0 + tid;
          float l = NEG_INF;
          if (r < lim) {
            float dot = 0.0;
#if KI_TYPE == DT_FP4
            // Byte offsets (off_ki, off_kis are in bytes); a NaN scale makes the logit NaN.
            uint ng = pc.Di / 16u, kbase = pc.off_ki + (krow0 + r) * (pc.Di / 2u);
            uint sbase = pc.off_kis + (krow0 + r) * ng;
            for (uint g = 0u; g < ng; ++g) {
              float part = 0.0;
              for (uint e = 0u; e < 8u; ++e) {
                uint byte = BYTE_AT(ki_d, kbase + 8u * g + e), d = 16u * g + 2u * e;
                part += sh_qi[d] * fp4_to_f32(byte) + sh_qi[d + 1u] * fp4_to_f32(byte >> 4);
              }
              dot += fp8_to_f32(BYTE_AT(kis_b, sbase + g)) * part;
            }
#else
            uint kbase = pc.off_ki + (krow0 + r) * pc.Di;
            for (uint d = 0u; d < pc.Di; ++d) dot += sh_qi[d] * LD(KI_TYPE, ki_d, kbase + d);
            if (pc.has_scale != 0u) dot *= kis_d[pc.off_kis + krow0 + r];
#endif
            l = pc.scale * dot;
          }
          qnan = qnan || wg_max(isnan(l) ? 1.0 : 0.0) > 0.0;  // uniform
          if (isnan(l)) l = NEG_INF;
          float tm = wg_max(l);
          if (pc.pool_lse != 0u && tm != NEG_INF) {
            float m_new = max(qm, tm);
            qsum = qsum * exp(qm - m_new) + wg_sum(r < lim ? exp(l - m_new) : 0.0);
            qm = m_new;
          } else {
            qm = max(qm, tm);
          }
        }
        float pooled = qnan ? QNAN : (pc.pool_lse != 0u && qsum > 0.0) ? qm + log(qsum) : qm;
        result = isnan(result) || isnan(pooled) ? QNAN : max(result, pooled);
        barrier();  // sh_qi is reloaded for the next query
      }
    }
  }
  if (tid == 0u) out_d[pc.off_out + (n * pc.Hi + j) * pc.mb_out + c] = result;
}
