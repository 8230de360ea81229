#version 450
#extension GL_GOOGLE_include_directive : require
// block_topk: one workgroup per (query block n, selection head). Exact and
// deterministic: forced blocks, then the best other blocks found by a 4-pass radix
// select on order-preserving 32-bit keys of the scores (NaN and -inf excluded, -0 == +0),
// ties at the threshold going to the lowest block indices. Output ascending, -1 padded.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_score, off_kvlen, off_cuq, off_idx, off_cnt;
  uint B, Hs, MB, Qb, NQ, Bs, k, n_sink, n_local;
} pc;

layout(std430, binding = 1) readonly buffer ScoreBuf { float score_d[]; };
layout(std430, binding = 2) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 3) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 4) writeonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 5) writeonly buffer CntBuf { int cnt_d[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T 0x7fffffffu
#include "seq.glsl"

shared uint hist[256];
shared uint sh_digit, sh_remaining;

uint g_row;          // element offset of this row's scores
uint g_local_lo, g_local_hi;  // forced local range [lo, hi] (empty when lo > hi)

bool is_forced(uint c) { return c < pc.n_sink || (c >= g_local_lo && c <= g_local_hi); }

// Order-preserving key of a candidate's score; 0 = not a candidate (NaN, -inf).
uint score_key(uint c) {
  // Bit tests, not float compares, so that no fast-math assumption can change them.
  uint u = floatBitsToUint(score_d[g_row + c]);
  if ((u & 0x7fffffffu) > 0x7f800000u || u == 0xff800000u) return 0u;  // NaN, -inf
  if ((u & 0x7fffffffu) == 0u) u = 0u;                                  // -0 == +0
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);  // >= 0x00800000 here
}

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.MB * pc.Bs;
  if (gid == 0u && tid == 0u) {
    if (seq_validate(maxkv, pc.Qb, false) != pc.NQ) flag_error(ERR_NQ);
  }
  if (gid >= pc.NQ * pc.Hs) return;
  g_row = pc.off_score + gid * pc.MB;
  uint out_row = pc.off_idx + gid * pc.k;
  uint cnt_at = pc.off_cnt + gid;

  uint b;
  SeqInfo s;
  int p0, p1;
  if (!seq_qblock(gid / pc.Hs, maxkv, pc.Qb, b, s, p0, p1)) {
    for (uint i = tid; i < pc.k; i += WGS) idx_d[out_row + i] = -1;
    if (tid == 0u) cnt_d[cnt_at] = 0;
    return;
  }
  uint last = uint(p1) / pc.Bs;
  uint nvalid = last + 1u;
  if (nvalid <= pc.k) {
    for (uint i = tid; i < pc.k; i += WGS) idx_d[out_row + i] = i < nvalid ? int(i) : -1;
    if (tid == 0u) cnt_d[cnt_at] = int(nvalid);
    return;
  }
  g_local_lo = 1u;
  g_local_hi = 0u;
  if (pc.n_local > 0u) {
    uint first = uint(p0) / pc.Bs;
    g_local_lo = first + 1u >= pc.n_local ? first + 1u - pc.n_local : 0u;
    g_local_hi = last;
  }

  // Count forced blocks and candidates.
  uint nf = 0u, nc = 0u;
  for (uint c = tid; c < nvalid; c += WGS) {
    if (is_forced(c)) nf += 1u;
    else if (score_key(c) != 0u) nc += 1u;
  }
  nf = wg_sum_u(nf);
  nc = wg_sum_u(nc);
  if (nf > pc.k) {
    if (tid == 0u) flag_error(ERR_K);
    for (uint i = tid; i < pc.k; i += WGS) idx_d[out_row + i] = -1;
    if (tid == 0u) cnt_d[cnt_at] = 0;
    return;
  }
  uint need = pc.k - nf;

  // Threshold key: every candidate with a larger key is taken, plus the first `ties`
  // (by index) with an equal one. All candidates when they fit.
  uint thresh = 0u, ties = 0u;
  if (nc > need) {
    uint prefix = 0u, remaining = need;
    for (int shift = 24; shift >= 0; shift -= 8) {
      uint hi_mask = shift == 24 ? 0u : (0xffffffffu << uint(shift + 8));
      for (uint i = tid; i < 256u; i += WGS) hist[i] = 0u;
      barrier();
      for (uint c = tid; c < nvalid; c += WGS) {
        if (is_forced(c)) continue;
        uint key = score_key(c);
        if (key != 0u && (key & hi_mask) == (prefix & hi_mask))
          atomicAdd(hist[(key >> uint(shift)) & 255u], 1u);
      }
      barrier();
      if (tid == 0u) {
        uint cum = 0u;
        int d = 255;
        for (; d > 0; --d) {
          if (cum + hist[d] >= remaining) break;
          cum += hist[d];
        }
        sh_digit = uint(d);
        sh_remaining = remaining - cum;
      }
      barrier();
      prefix |= sh_digit << uint(shift);
      remaining = sh_remaining;
      barrier();
    }
    thresh = prefix;
    ties = remaining;
  }

  // Emit in ascending block order: forced, above the threshold, or an early tie.
  uint n_out = 0u, n_ties = 0u;
  for (uint c0 = 0u; c0 < nvalid; c0 += WGS) {
    uint c = c0 + tid;
    bool in_range = c < nvalid;
    bool forced = in_range && is_forced(c);
    uint key = (in_range && !forced) ? score_key(c) : 0u;
    bool tie = key != 0u && key == thresh;
    uint tie_total;
    uint tie_before = wg_exclusive_scan(tie ? 1u : 0u, tie_total);
    bool sel = forced || (key != 0u && key > thresh) || (tie && n_ties + tie_before < ties);
    uint sel_total;
    uint at = n_out + wg_exclusive_scan(sel ? 1u : 0u, sel_total);
    if (sel && at < pc.k) idx_d[out_row + at] = int(c);
    n_out += sel_total;
    n_ties += tie_total;
  }
  n_out = min(n_out, pc.k);
  for (uint i = n_out + tid; i < pc.k; i += WGS) idx_d[out_row + i] = -1;
  if (tid == 0u) cnt_d[cnt_at] = int(n_out);
}
