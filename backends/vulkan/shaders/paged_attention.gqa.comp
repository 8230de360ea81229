#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
// sparse_block_attention with token-level selection (Qb = 1: decode, and prefill with
// Qb = 1) and dense_attention (pc.dense = 1: entry e of every token's list is logical
// block e, k = max_blocks, no block_idx), GQA-shared: one workgroup per (token t, KV
// head g, split) serves all G <= 16 query heads of the group from one read of each
// selected K/V slab. The selected blocks are cut into tiles of TK keys ("units": entry x
// part of the block); a split takes `per_split` consecutive units, and dense splits past
// the token's causal limit attend nothing and load nothing. Per tile, the workgroup loads K and V with
// coalesced 16-byte loads (uvec4, issued one tile ahead into registers), stores them to
// shared memory, computes S = Q K^T (each invocation RPT rows x 1 key), the online
// softmax in base 2 (each query row owned by 8 invocations of one subgroup, reduced with
// subgroupShuffleXor: needs a subgroup size >= 8, checked by the host), and O += P V
// (each invocation one 16-byte column of V for 2 rows, 4 at f32: each V element is
// unpacked once per 2 rows, not once per row). Keys outside the attended set are never
// loaded (zero-filled), so NaN in cache slack cannot reach an output.
// SPLIT=1: each workgroup writes its normalised f32 partial and LSE to scratch, merged by
// paged_attention.combine.comp in fixed split order; SPLIT=0: out and lse directly.
// A_TYPE: dtype of q, the caches and out. Requires D % 8 == 0, D <= 128, the K/V views
// 16-byte aligned (host checks; other shapes use paged_attention.comp).
// BDA=1: K and V are read through their buffer device addresses (push constants k_addr,
// v_addr: the views' first bytes) instead of bindings 2 and 3, for caches larger than
// maxStorageBufferRange (8 GiB each at B = 8, 1M); the uvec4 indices stay 32-bit (up to
// 64 GiB per cache), the byte address is 64-bit.
#define WGS 128
#include "common.glsl"
#if BDA
#include "bda.glsl"
#endif

layout(push_constant) uniform PushConstants {
#if BDA
  uint64_t k_addr, v_addr;  // (off_k4 / off_v4 unused: 0)
#endif
  uint off_q, off_k4, off_v4, off_bt, off_kvlen, off_cuq, off_idx, off_out, off_lse;  // k4, v4: 16-byte units
  uint T, Hq, Hkv, G, D, P, Bs, max_blocks, B, NQ, k, Hs;
  float scale;
  uint n_split;    // workgroups per (token, KV head)
  uint per_split;  // units (tiles of TK keys) per split
  uint tpb;        // units per KV block: ceil(Bs / TK)
  uint dense;      // 1: entry e is logical block e (dense_attention), block_idx unused
} pc;

#if SPLIT
#define OUT_TYPE DT_F32
#else
#define OUT_TYPE A_TYPE
#endif

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { uvec4 k4[]; };
layout(std430, binding = 3) readonly buffer VBuf { uvec4 v4[]; };
layout(std430, binding = 4) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 5) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 6) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 7) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 8) writeonly buffer OutBuf { STORAGE(OUT_TYPE) out_d[]; };
layout(std430, binding = 9) writeonly buffer LseBuf { float lse_d[]; };

// The uvec4 number i of the K / V view.
#if BDA
#define K4(i) U4_AT(pc.k_addr, i)
#define V4(i) U4_AT(pc.v_addr, i)
#else
#define K4(i) k4[pc.off_k4 + (i)]
#define V4(i) v4[pc.off_v4 + (i)]
#endif

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"
#include "seq_wg.glsl"
#include "table_check.glsl"

#if A_TYPE == DT_F32
#define ES 4u
#define TK 16u
#else
#define ES 2u
#define TK 32u
#endif
#define ROWS 16u                   // query rows per workgroup (G <= ROWS)
#define MAXD 128u
#define CPR (MAXD * ES / 16u)      // uvec4 per row at MAXD (16 or 32)
#define KST (CPR + 1u)             // padded K row stride in uvec4 (conflict-free S reads)
#define PST (TK + 1u)              // padded P row stride in floats
#define RPT (ROWS * TK / WGS)      // S step: rows per invocation (4 or 2)
#define KPT (TK / 8u)              // softmax step: keys per invocation (4 or 2)
#define PRI (ROWS * CPR / WGS)     // PV step: rows per invocation (2 or 4), one uvec4 column of V
#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453
// Tile loads: TK * CPR uvec4 per matrix = 4 per invocation, element lin = tid + i * WGS.

shared vec4 sh_q[ROWS * MAXD / 4u];  // q * scale * log2(e), f32, zero past D and G
shared uvec4 sh_k[TK * KST];
shared uvec4 sh_v[TK * CPR];
shared float sh_p[ROWS * PST];       // scores, then probabilities
shared float sh_alpha[ROWS];         // per row: rescale of O for this tile; at the end l_run
shared float sh_mrun[ROWS];          // per row, at the end: m_run
shared uint sh_badrow[ROWS];         // per row, at the end: 1 when an accumulated value is not finite
shared uint sh_ubase[WGS];           // unit table: uvec4 index of the unit's first key row
shared uint sh_un[WGS];              //             its keys (0: contributes nothing)

// 16 bytes -> two vec4 (16-bit types: elements 0-3 and 4-7; f32: lo only).
void unpack2(uvec4 w, out vec4 lo, out vec4 hi) {
#if A_TYPE == DT_F32
  lo = uintBitsToFloat(w);
  hi = vec4(0.0);
#elif A_TYPE == DT_BF16
  lo = vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xffff0000u), uintBitsToFloat(w.y << 16),
            uintBitsToFloat(w.y & 0xffff0000u));
  hi = vec4(uintBitsToFloat(w.z << 16), uintBitsToFloat(w.z & 0xffff0000u), uintBitsToFloat(w.w << 16),
            uintBitsToFloat(w.w & 0xffff0000u));
#else
  lo = vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  hi = vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w));
#endif
}

// Loads element i (0..3) of this invocation's share of the tile of unit u (zeros for
// rows >= its key count and chunks past D).
#define TILE_LOAD(i, kdst, vdst)                                          \
  {                                                                       \
    uint lin_ = tid + (i) * WGS, j_ = lin_ / CPR, ch_ = lin_ % CPR;       \
    kdst = uvec4(0u);                                                     \
    vdst = uvec4(0u);                                                     \
    if (j_ < un_ && ch_ < cpr) {                                          \
      kdst = K4(ub_ + j_ * cpr + ch_);                                    \
      vdst = V4(ub_ + j_ * cpr + ch_);                                    \
    }                                                                     \
  }
#define LOAD_UNIT(u)                                                      \
  {                                                                       \
    uint ub_ = sh_ubase[u], un_ = sh_un[u];                               \
    TILE_LOAD(0u, kr0, vr0)                                               \
    TILE_LOAD(1u, kr1, vr1)                                               \
    TILE_LOAD(2u, kr2, vr2)                                               \
    TILE_LOAD(3u, kr3, vr3)                                               \
  }
// Rows >= n (the unit's keys) are stored as zeros: a speculatively loaded tile holds
// whatever follows the attended keys in the page (0 * NaN would reach O).
#define TILE_STORE(i, ksrc, vsrc, n)                                      \
  {                                                                       \
    uint lin_ = tid + (i) * WGS, j_ = lin_ / CPR, ch_ = lin_ % CPR;       \
    bool in_ = j_ < (n);                                                  \
    sh_k[j_ * KST + ch_] = in_ ? ksrc : uvec4(0u);                        \
    sh_v[j_ * CPR + ch_] = in_ ? vsrc : uvec4(0u);                        \
  }

// Entry e of the selection list starting at idx_d[sel] (dense: logical block e).
int entry(uint sel, uint e) { return pc.dense != 0u ? int(e) : idx_d[sel + e]; }

uint next_unit(uint u, uint nt) {
  while (u < nt && sh_un[u] == 0u) ++u;
  return u;
}

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.max_blocks * pc.Bs;
  if (gid == 0u) {  // uniform
    uint nq = wg_seq_validate(maxkv, 1u, true);
    if (tid == 0u && pc.dense == 0u && nq != pc.NQ) flag_error(ERR_NQ);
  }
  uint split = gid % pc.n_split, tg = gid / pc.n_split;
  if (tg >= pc.T * pc.Hkv) return;  // uniform
  uint t = tg / pc.Hkv, g = tg % pc.Hkv;
  uint cpr = pc.D * ES / 16u;   // uvec4 per K/V row
  uint gs = pc.Hs == 1u ? 0u : g;
  uint u0 = split * pc.per_split;
  uint u1 = min(u0 + pc.per_split, pc.k * pc.tpb);

  // With consistent decode data token t is query block t and sequence t (Qb = 1, one
  // token per sequence): load this split's first selection entries and their pages now,
  // in parallel with the batch lookup (used where it agrees), and request the K/V of the
  // split's first unit as well (every invocation reads the same two addresses). The
  // guessed tile is used only if the unit table built after the lookup names the same
  // rows; all min(TK, Bs - part * TK) rows of the unit's page part are read (in bounds),
  // and rows past the attended keys are zeroed when stored.
  int spec_c = -1, spec_pg = -1;
  if (tid < min(WGS, u1 - min(u0, u1)) && t < pc.NQ) {
    spec_c = entry(pc.off_idx + (t * pc.Hs + gs) * pc.k, (u0 + tid) / pc.tpb);
    if (spec_c >= 0 && uint(spec_c) < pc.max_blocks && t < pc.B) spec_pg = bt_d[pc.off_bt + t * pc.max_blocks + uint(spec_c)];
  }
  uvec4 kr0, kr1, kr2, kr3, vr0, vr1, vr2, vr3;  // the next tile, in flight
  uint spec_base = INVALID;
  if (u0 < u1 && t < pc.NQ && t < pc.B) {  // uniform
    uint e0 = u0 / pc.tpb, part0 = u0 % pc.tpb;
    int c = entry(pc.off_idx + (t * pc.Hs + gs) * pc.k, e0);
    int page = c >= 0 && uint(c) < pc.max_blocks ? bt_d[pc.off_bt + t * pc.max_blocks + uint(c)] : -1;
    if (page >= 0 && uint(page) < pc.P && part0 * TK < pc.Bs) {
      uint ub_ = ((uint(page) * pc.Hkv + g) * pc.Bs + part0 * TK) * cpr, un_ = min(TK, pc.Bs - part0 * TK);
      spec_base = ub_;
      TILE_LOAD(0u, kr0, vr0)
      TILE_LOAD(1u, kr1, vr1)
      TILE_LOAD(2u, kr2, vr2)
      TILE_LOAD(3u, kr3, vr3)
    }
  }

  // Invocation roles (by subgroup position, so that the 8 invocations sharing a row in
  // the softmax step are lanes 8i..8i+7 of one subgroup).
  uint vt = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  uint sj = vt % TK, srg = vt / TK;   // S step: key sj, rows srg*RPT ..
  uint pr = vt / 8u, l8 = vt % 8u;    // softmax: row pr, keys l8 + 8i
  // PV and the results: the uvec4 column vc of V (8 dims at 16-bit types, 4 at f32) for
  // rows pvr .. pvr + PRI - 1, so each V element is unpacked once per PRI rows.
  uint vc = vt % CPR, pvr = (vt / CPR) * PRI;

  for (uint i = tid; i < ROWS * MAXD / 4u; i += WGS) {
    uint r = i / (MAXD / 4u), d0 = (i % (MAXD / 4u)) * 4u;
    vec4 x = vec4(0.0);
    if (r < pc.G) {
      uint qo = pc.off_q + (t * pc.Hq + g * pc.G + r) * pc.D;
      [[unroll]] for (uint e = 0u; e < 4u; ++e)
        if (d0 + e < pc.D) x[e] = LD(A_TYPE, q_d, qo + d0 + e) * (pc.scale * LOG2E);
    }
    sh_q[i] = x;
  }

  if (tid < ROWS) sh_badrow[tid] = 0u;  // published by the barriers of wg_seq_lookup
  // A visible logit that is NaN or infinite makes l_run NaN for good, which marks the row
  // as non-finite (docs/spec.md, "Non-finite inputs").
  float m_run = NEG_INF, l_run = 0.0;
  // 16-bit types: rows pvr (o0: dims 0-3 of column vc, o1: 4-7) and pvr + 1 (o2, o3);
  // f32: rows pvr .. pvr + 3 (o0 .. o3, the 4 dims of column vc).
  vec4 o0 = vec4(0.0), o1 = vec4(0.0), o2 = vec4(0.0), o3 = vec4(0.0);

  SeqLookup lk = wg_seq_lookup(t, true, maxkv, 1u);  // uniform; its barriers publish sh_q
  uint b = lk.b, pos = 0u, qb = 0u, nblk = 0u;
  bool ok = lk.found && pc.B > 0u;
  if (ok) {
    pos = uint(lk.s.pos0 + (int(t) - lk.s.q0));
    nblk = (uint(lk.s.kvl) + pc.Bs - 1u) / pc.Bs;
    if (g == 0u && split == 0u && int(t) == lk.s.q0) check_table_row(pc.off_bt + b * pc.max_blocks, nblk, pc.P);
    qb = lk.qb0 + (int(t) - lk.s.q0);  // Qb = 1: one query block per token
    ok = pc.dense != 0u || qb < pc.NQ;  // dense: NQ = T, no selection to index
  }
  if (ok) {  // uniform
    uint s_lim = pos + 1u;  // causal: tokens s <= pos (pos < kv_len)
    uint sel = pc.off_idx + (qb * pc.Hs + gs) * pc.k;
    if (pc.dense != 0u) u1 = min(u1, (s_lim + pc.Bs - 1u) / pc.Bs * pc.tpb);  // the visible blocks' units
    for (uint cb = u0; cb < u1; cb += WGS) {
      uint nt = min(WGS, u1 - cb);
      barrier();  // earlier readers of the unit table and the tiles are done
      if (tid < nt) {
        uint u = cb + tid, e = u / pc.tpb, part = u % pc.tpb;
        bool spec = cb == u0 && qb == t;
        int c = spec ? spec_c : entry(sel, e);
        uint n = 0u, base = 0u;
        // Padding (-1) and entries outside the sequence contribute nothing.
        if (c >= 0 && uint(c) < nblk && uint(c) * pc.Bs <= pos) {
          int page = spec && b == t ? spec_pg : bt_d[pc.off_bt + b * pc.max_blocks + uint(c)];
          if (page < 0 || uint(page) >= pc.P) {
            flag_error(ERR_BLOCK_TABLE);
          } else {
            uint key0 = uint(c) * pc.Bs + part * TK;
            uint kend = min(uint(c) * pc.Bs + pc.Bs, s_lim);
            if (key0 < kend) {
              n = min(TK, kend - key0);
              base = ((uint(page) * pc.Hkv + g) * pc.Bs + part * TK) * cpr;
            }
          }
        }
        sh_ubase[tid] = base;
        sh_un[tid] = n;
      }
      barrier();
      uint cur = next_unit(0u, nt);
      // The guessed first tile is right when the table names the same rows (uniform).
      bool have = cb == u0 && cur == 0u && sh_un[0] > 0u && sh_ubase[0] == spec_base;
      if (cur < nt && !have) LOAD_UNIT(cur)
      while (cur < nt) {
        uint n = sh_un[cur];
        barrier();  // the previous tile's readers are done
        TILE_STORE(0u, kr0, vr0, n)
        TILE_STORE(1u, kr1, vr1, n)
        TILE_STORE(2u, kr2, vr2, n)
        TILE_STORE(3u, kr3, vr3, n)
        barrier();
        uint nxt = next_unit(cur + 1u, nt);
        if (nxt < nt) LOAD_UNIT(nxt)  // in flight during this tile's math

        // ---- S = Q K^T: key sj, rows srg*RPT .. srg*RPT + RPT - 1 ----
        {
          vec4 acc = vec4(0.0);  // rows srg*RPT + 0 .. 3 (f32: 0 .. 1)
          uint qrow = srg * RPT * (MAXD / 4u);
          [[unroll]] for (uint ch = 0u; ch < CPR; ++ch) {
            if (ch < cpr) {
              vec4 klo, khi;
              unpack2(sh_k[sj * KST + ch], klo, khi);
#if A_TYPE == DT_F32
              uint qc = qrow + ch;
              acc.x += dot(sh_q[qc], klo);
              acc.y += dot(sh_q[qc + MAXD / 4u], klo);
#else
              uint qc = qrow + 2u * ch;
              acc.x += dot(sh_q[qc], klo) + dot(sh_q[qc + 1u], khi);
              acc.y += dot(sh_q[qc + MAXD / 4u], klo) + dot(sh_q[qc + MAXD / 4u + 1u], khi);
              acc.z += dot(sh_q[qc + MAXD / 2u], klo) + dot(sh_q[qc + MAXD / 2u + 1u], khi);
              acc.w += dot(sh_q[qc + 3u * MAXD / 4u], klo) + dot(sh_q[qc + 3u * MAXD / 4u + 1u], khi);
#endif
            }
          }
          bool kv = sj < n;
          uint pb = srg * RPT * PST + sj;
          sh_p[pb] = kv ? acc.x : NEG_INF;
          sh_p[pb + PST] = kv ? acc.y : NEG_INF;
#if A_TYPE != DT_F32
          sh_p[pb + 2u * PST] = kv ? acc.z : NEG_INF;
          sh_p[pb + 3u * PST] = kv ? acc.w : NEG_INF;
#endif
        }
        barrier();

        // ---- online softmax (base 2) of row pr over this tile ----
        float alpha;
        {
          uint pb = pr * PST + l8;
          vec4 sv = vec4(sh_p[pb], sh_p[pb + 8u], NEG_INF, NEG_INF);
#if A_TYPE != DT_F32
          sv.z = sh_p[pb + 16u];
          sv.w = sh_p[pb + 24u];
#endif
          float mt = max(max(sv.x, sv.y), max(sv.z, sv.w));
          mt = max(mt, subgroupShuffleXor(mt, 4u));
          mt = max(mt, subgroupShuffleXor(mt, 2u));
          mt = max(mt, subgroupShuffleXor(mt, 1u));
          float m_new = max(m_run, mt);  // finite: key 0 of a unit is always attended
          alpha = m_run == NEG_INF ? 0.0 : exp2(m_run - m_new);
          vec4 pv = vec4(sv.x == NEG_INF ? 0.0 : exp2(sv.x - m_new), sv.y == NEG_INF ? 0.0 : exp2(sv.y - m_new),
                         sv.z == NEG_INF ? 0.0 : exp2(sv.z - m_new), sv.w == NEG_INF ? 0.0 : exp2(sv.w - m_new));
          sh_p[pb] = pv.x;
          sh_p[pb + 8u] = pv.y;
#if A_TYPE != DT_F32
          sh_p[pb + 16u] = pv.z;
          sh_p[pb + 24u] = pv.w;
#endif
          float ps = (pv.x + pv.y) + (pv.z + pv.w);
          ps += subgroupShuffleXor(ps, 4u);
          ps += subgroupShuffleXor(ps, 2u);
          ps += subgroupShuffleXor(ps, 1u);
          // Keys l8 + 8i < n of the tile are attended; their logits must be finite.
          float bad = 0.0;
          [[unroll]] for (uint i = 0u; i < 4u; ++i)
            if (l8 + 8u * i < n && (isnan(sv[i]) || isinf(sv[i]))) bad = 1.0;
          bad = max(bad, subgroupShuffleXor(bad, 4u));
          bad = max(bad, subgroupShuffleXor(bad, 2u));
          bad = max(bad, subgroupShuffleXor(bad, 1u));
          l_run = bad > 0.0 ? QNAN : l_run * alpha + ps;
          m_run = m_new;
          if (l8 == 0u) sh_alpha[pr] = alpha;
        }
        barrier();

        // ---- O = O * alpha + P V: rows pvr .., column vc ----
#if A_TYPE == DT_F32
        o0 *= sh_alpha[pvr];
        o1 *= sh_alpha[pvr + 1u];
        o2 *= sh_alpha[pvr + 2u];
        o3 *= sh_alpha[pvr + 3u];
        if (vc < cpr) {
          [[unroll]] for (uint j = 0u; j < TK; ++j) {
            vec4 v = uintBitsToFloat(sh_v[j * CPR + vc]);
            o0 += sh_p[pvr * PST + j] * v;
            o1 += sh_p[(pvr + 1u) * PST + j] * v;
            o2 += sh_p[(pvr + 2u) * PST + j] * v;
            o3 += sh_p[(pvr + 3u) * PST + j] * v;
          }
        }
#else
        {
          float a0 = sh_alpha[pvr], a1 = sh_alpha[pvr + 1u];
          o0 *= a0;
          o1 *= a0;
          o2 *= a1;
          o3 *= a1;
        }
        if (vc < cpr) {
          [[unroll]] for (uint j = 0u; j < TK; ++j) {
            vec4 lo, hi;
            unpack2(sh_v[j * CPR + vc], lo, hi);
            float p0 = sh_p[pvr * PST + j], p1 = sh_p[(pvr + 1u) * PST + j];
            o0 += p0 * lo;
            o1 += p0 * hi;
            o2 += p1 * lo;
            o3 += p1 * hi;
          }
        }
#endif
        cur = nxt;
      }
    }
  }

  // ---- results: l_run and m_run of each row to shared memory (the softmax owners),
  // then rows pvr .., column vc (uniform control flow: barriers) ----
  barrier();  // the last tile's PV reads of sh_alpha are done
  if (l8 == 0u) {
    sh_alpha[pr] = l_run;
    sh_mrun[pr] = m_run;
  }
  if (vc < cpr) {  // non-finite accumulated values mark their row
#if A_TYPE == DT_F32
    vec4 orow[4] = vec4[4](o0, o1, o2, o3);
    [[unroll]] for (uint r = 0u; r < 4u; ++r)
      if (pvr + r < ROWS && (any(isnan(orow[r])) || any(isinf(orow[r])))) atomicOr(sh_badrow[pvr + r], 1u);
#else
    if (any(isnan(o0)) || any(isinf(o0)) || any(isnan(o1)) || any(isinf(o1))) atomicOr(sh_badrow[pvr], 1u);
    if (pvr + 1u < ROWS && (any(isnan(o2)) || any(isinf(o2)) || any(isnan(o3)) || any(isinf(o3))))
      atomicOr(sh_badrow[pvr + 1u], 1u);
#endif
  }
  barrier();
  [[unroll]] for (uint r = 0u; r < PRI; ++r) {
    uint rr = pvr + r;
    if (rr >= pc.G) continue;
    float l = sh_alpha[rr];
    bool nan_row = isnan(l) || sh_badrow[rr] != 0u;
    bool attended = l > 0.0;
    float inv = nan_row ? QNAN : attended ? 1.0 / l : 0.0;
    uint row = t * pc.Hq + g * pc.G + rr;
#if SPLIT
    uint ob = pc.off_out + (row * pc.n_split + split) * pc.D;
    uint lb = pc.off_lse + row * pc.n_split + split;
#else
    uint ob = pc.off_out + row * pc.D;
    uint lb = pc.off_lse + row;
#endif
#if A_TYPE == DT_F32
    vec4 x = (r == 0u ? o0 : r == 1u ? o1 : r == 2u ? o2 : o3) * inv;
    if (vc < cpr) {
      uint d = ob + vc * 4u;
      ST(OUT_TYPE, out_d, d, x.x); ST(OUT_TYPE, out_d, d + 1u, x.y);
      ST(OUT_TYPE, out_d, d + 2u, x.z); ST(OUT_TYPE, out_d, d + 3u, x.w);
    }
#else
    vec4 x = (r == 0u ? o0 : o2) * inv, y = (r == 0u ? o1 : o3) * inv;
    if (vc < cpr) {
      uint d = ob + vc * 8u;
      ST(OUT_TYPE, out_d, d, x.x); ST(OUT_TYPE, out_d, d + 1u, x.y);
      ST(OUT_TYPE, out_d, d + 2u, x.z); ST(OUT_TYPE, out_d, d + 3u, x.w);
      ST(OUT_TYPE, out_d, d + 4u, y.x); ST(OUT_TYPE, out_d, d + 5u, y.y);
      ST(OUT_TYPE, out_d, d + 6u, y.z); ST(OUT_TYPE, out_d, d + 7u, y.w);
    }
#endif
    if (vc == 0u) lse_d[lb] = nan_row ? QNAN : attended ? (sh_mrun[rr] + log2(l)) * LN2 : NEG_INF;
  }
}
