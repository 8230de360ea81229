#version 450
#extension GL_GOOGLE_include_directive : require
// sparse_block_attention (SPARSE=1) and dense_attention (SPARSE=0) over the paged,
// block-major KV cache. One workgroup per (token t, query head h, split): the split
// takes `per_split` consecutive units of the key set (block_idx entries, or logical
// blocks for dense). With SPLIT=1 each workgroup writes its normalised partial output
// and LSE in f32 to scratch for paged_attention.combine.comp; with SPLIT=0 (one split) it writes
// out and lse directly. A_TYPE: dtype of q, the caches and out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_q, off_k, off_v, off_bt, off_kvlen, off_cuq, off_idx, off_out, off_lse;
  uint T, Hq, Hkv, D, P, Bs, max_blocks, B, Qb, NQ, k, Hs;
  float scale;
  uint n_split, per_split;
} pc;

#if SPLIT
#define OUT_TYPE DT_F32
#else
#define OUT_TYPE A_TYPE
#endif

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 3) readonly buffer VBuf { STORAGE(A_TYPE) v_d[]; };
layout(std430, binding = 4) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 5) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 6) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 7) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 8) writeonly buffer OutBuf { STORAGE(OUT_TYPE) out_d[]; };
layout(std430, binding = 9) writeonly buffer LseBuf { float lse_d[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"

#define K_AT(i) LD(A_TYPE, k_d, pc.off_k + (i))
#define V_AT(i) LD(A_TYPE, v_d, pc.off_v + (i))
#include "attn_core.glsl"
#include "table_check.glsl"

// Tokens [c*Bs, s_end) of logical block c, stored on `page` for KV head g.
void attend_block(uint page, uint g, uint c, uint s_end) {
  uint s0 = c * pc.Bs;
  uint base = (page * pc.Hkv + g) * pc.Bs * pc.D;
  for (uint j0 = 0u; s0 + j0 < s_end; j0 += WGS) {
    uint slot = j0 + gl_LocalInvocationID.x;
    attn_tile(s0 + slot < s_end, base + slot * pc.D, min(uint(WGS), s_end - s0 - j0));
  }
}

// The page of logical block c of sequence b, or INVALID (flagged) when out of range.
uint page_of(uint b, uint c) {
  int page = bt_d[pc.off_bt + b * pc.max_blocks + c];
  if (page < 0 || uint(page) >= pc.P) {
    if (gl_LocalInvocationID.x == 0u) flag_error(ERR_BLOCK_TABLE);
    return INVALID;
  }
  return uint(page);
}

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.max_blocks * pc.Bs;
  if (gid == 0u && tid == 0u) {
    uint nq = seq_validate(maxkv, SPARSE != 0 ? pc.Qb : 1u, true);
    if (SPARSE != 0 && nq != pc.NQ) flag_error(ERR_NQ);
  }
  uint row = gid / pc.n_split, split = gid % pc.n_split;
  if (row >= pc.T * pc.Hq) return;
  uint t = row / pc.Hq, h = row % pc.Hq;
  uint g = h / (pc.Hq / pc.Hkv);
  attn_begin(pc.off_q + row * pc.D, pc.D, pc.scale);
  uint u0 = split * pc.per_split;  // this split's units [u0, u0 + per_split)

  bool ok = pc.B > 0u;
  SeqInfo s;
  uint b = 0u;
  if (ok) {
    b = seq_find(t);
    s = seq_info(b, maxkv);
    ok = s.ok && int(t) >= s.q0 && int(t) < s.q0 + s.qlen;
  }
  if (ok) {
    uint pos = uint(s.pos0 + (int(t) - s.q0));
    uint s_lim = pos + 1u;  // causal: tokens s <= pos (pos < kv_len)
#if SPARSE
    uint nblk = (uint(s.kvl) + pc.Bs - 1u) / pc.Bs;
    if (h == 0u && split == 0u && int(t) == s.q0) check_table_row(pc.off_bt + b * pc.max_blocks, nblk, pc.P);
    uint qb = seq_qb_start(b, maxkv, pc.Qb) + pos / pc.Qb - uint(s.pos0) / pc.Qb;
    if (qb < pc.NQ) {
      uint sel = pc.off_idx + (qb * pc.Hs + (pc.Hs == 1u ? 0u : g)) * pc.k;
      for (uint i = u0; i < min(u0 + pc.per_split, pc.k); ++i) {
        int c = idx_d[sel + i];
        // Padding (-1) and entries outside the sequence contribute nothing.
        if (c < 0 || uint(c) >= nblk || uint(c) * pc.Bs > pos) continue;
        uint page = page_of(b, uint(c));
        if (page != INVALID) attend_block(page, g, uint(c), min(uint(c) * pc.Bs + pc.Bs, s_lim));
      }
    }
#else
    for (uint c = u0; c < u0 + pc.per_split && c * pc.Bs < s_lim; ++c) {
      uint page = page_of(b, c);
      if (page != INVALID) attend_block(page, g, c, min(c * pc.Bs + pc.Bs, s_lim));
    }
#endif
  }
  attn_finish();
#if SPLIT
  uint o = pc.off_out + (row * pc.n_split + split) * pc.D;
  uint l = pc.off_lse + row * pc.n_split + split;
#else
  uint o = pc.off_out + row * pc.D;
  uint l = pc.off_lse + row;
#endif
  [[unroll]] for (uint j = 0u; j < DPT; ++j) {
    uint d = tid + j * WGS;
    if (d < pc.D) ST(OUT_TYPE, out_d, o + d, attn_out(j));
  }
  if (tid == 0u) lse_d[l] = attn_lse();
}
