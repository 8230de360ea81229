#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
// indexer_score, streaming form: one workgroup per (query block n, run of `bpw` KV
// blocks) scores the blocks' keys for every indexer head at once, so each key is read
// once per query block. The batch lookup is cooperative (seq_wg.glsl), the pages of the
// run are fetched together, and the next block's keys are requested before the current
// block is pooled, so the load latency overlaps the reductions.
// Keys are read with coalesced 16-byte loads (uvec4): 8 consecutive invocations of one
// subgroup ("a row group") split a key row into 16-byte chunks, the 16 row groups take
// rows rg, rg + 16, ..., so every load instruction reads whole rows, and all NI rows of
// an invocation are in flight together. Each invocation holds its chunks of q for HC
// heads in registers; the 8 partial dot products of NI rows x HC heads are combined by a
// reduce-scatter butterfly (subgroupShuffleXor 4, 2, 1: needs a subgroup size >= 8,
// checked by the host), after which each invocation holds the HC logits of one row. The
// block is pooled per query (max, or log-sum-exp) with subgroup reductions and one value
// per subgroup in shared memory, and the query block keeps the maximum. Rows at or past
// kv_len are never loaded, so NaN in cache slack cannot reach a score.
// QI_TYPE: dtype of qi; KI_TYPE: dtype of ki_cache (f32, bf16, fp8_e4m3 or fp4_e2m1x2).
// NVFP4 keys (fp4_e2m1x2) are read in 8-byte units instead (uvec2: one group of 16 E2M1
// codes, so each invocation of a row group owns one group and its e4m3 scale from
// ki_scale [P][Bs][Di/16]): the group's partial dot product is multiplied by its scale
// before the butterfly (a NaN scale makes its row's logit NaN; rows past kv_len are
// masked before pooling like NaN keys).
// Requires Bs <= 128, Di <= 128 with 16-byte key rows (8-byte for NVFP4), the ki view
// aligned to that unit (host checks; other shapes use indexer_score.comp).
// BDA=1: the keys are read through their buffer device address (push constant ki_addr,
// the view's first byte) instead of binding 2, for key caches larger than
// maxStorageBufferRange.
#define WGS 128
#include "common.glsl"
#if KI_TYPE == DT_FP4
#define KVEC uvec2      // unit of the key reads: 8 bytes (16 codes)
#else
#define KVEC uvec4      // 16 bytes
#endif
#if BDA
#include "bda.glsl"
#if KI_TYPE == DT_FP4
#define KI4(i) U2_AT(pc.ki_addr, i)
#else
#define KI4(i) U4_AT(pc.ki_addr, i)
#endif
#else
#define KI4(i) ki4[i]
#endif

layout(push_constant) uniform PushConstants {
#if BDA
  uint64_t ki_addr;  // (off_ki4 unused: 0)
#endif
  uint off_qi, off_ki4, off_kis, off_bt, off_kvlen, off_cuq, off_out;  // off_ki4: in KVEC units
  uint T, Hi, Di, P, Bs, mb_table, mb_out, B, Qb, NQ, has_scale, pool_lse;
  float scale;
  uint bpw;  // KV blocks per workgroup (<= MAX_BPW)
} pc;

layout(std430, binding = 1) readonly buffer QiBuf { STORAGE(QI_TYPE) qi_d[]; };
layout(std430, binding = 2) readonly buffer KiBuf { KVEC ki4[]; };
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
#include "seq_wg.glsl"

#if KI_TYPE == DT_F32
#define E 4u      // key elements per chunk (16 bytes; NVFP4: 8 bytes)
#define CPL 4u    // chunks per invocation and row (Di <= 128)
#elif KI_TYPE == DT_BF16
#define E 8u
#define CPL 2u
#else
#define E 16u
#define CPL 1u
#endif
// NI * HC / LPR == HC: after the reduce-scatter each invocation holds the HC heads of
// one row (the pooling below relies on it).
#define LPR 8u              // invocations per key row (a row group)
#define NRG (WGS / LPR)     // row groups: 16
#define NI 8u               // rows per invocation: NRG * NI = 128 rows per workgroup
#define HC 4u               // heads per pass

#define MAX_BPW 16u
shared uint sh_page[MAX_BPW];       // page of each block of the run (INVALID: no work)
shared float sh_m[WGS / 8u * HC];  // per subgroup (size >= 8) and head: max
shared float sh_s[WGS / 8u * HC];  //                                    sum of exp (lse pool)
shared vec4 sh_q0[HC * 32u];        // guessed query (token n), heads 0 .. HC - 1, scaled, 0 past Di

// 16 bytes of keys -> E floats (fp8: value / 2^8, folded into q by the caller); NVFP4:
// 8 bytes -> 16 E2M1 values / 2^13 (also folded into q).
void unpack_keys(KVEC w, out float f[E]) {
#if KI_TYPE == DT_F32
  f[0] = uintBitsToFloat(w.x);
  f[1] = uintBitsToFloat(w.y);
  f[2] = uintBitsToFloat(w.z);
  f[3] = uintBitsToFloat(w.w);
#elif KI_TYPE == DT_BF16
  uint ws[4] = uint[4](w.x, w.y, w.z, w.w);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    f[2u * i] = uintBitsToFloat(ws[i] << 16);
    f[2u * i + 1u] = uintBitsToFloat(ws[i] & 0xffff0000u);
  }
#elif KI_TYPE == DT_FP4
  // E2M1 code c = (s, e1 e0 m) as the f16 with sign s and bits 9..12 = c + min(c, 2): the
  // normal f16 (e2m1 value) / 2^13 (c = 1 -> 2^-14 = 0.5 / 2^13, c >= 2 -> exponent e + 1;
  // no f16 subnormal, which a conversion could flush). Per nibble, without carries.
  uint ws[2] = uint[2](w.x, w.y);
  [[unroll]] for (uint i = 0u; i < 2u; ++i) {
    uint x = ws[i];
    uint ge2 = ((x >> 1) | (x >> 2)) & 0x11111111u;                     // c >= 2
    uint m = (x & 0x77777777u) + (ge2 << 1) + (x & ~ge2 & 0x11111111u);  // c + min(c, 2) <= 9
    [[unroll]] for (uint k = 0u; k < 4u; ++k) {
      uint y = m >> (8u * k), sg = x >> (8u * k);
      uint h = ((y & 0xfu) << 9) | ((sg & 0x8u) << 12) | ((y & 0xf0u) << 21) | ((sg & 0x80u) << 24);
      vec2 a = unpackHalf2x16(h);
      f[8u * i + 2u * k] = a.x;
      f[8u * i + 2u * k + 1u] = a.y;
    }
  }
#else
  // e4m3 byte b as an f16: sign | (b & 0x7f) << 7 is the e4m3 value / 2^8, exact for every
  // finite value including subnormals (bias 15 vs 7); magnitude 0x7f is NaN.
  uint ws[4] = uint[4](w.x, w.y, w.z, w.w);
  [[unroll]] for (uint i = 0u; i < 4u; ++i) {
    uint x = ws[i];
    uint lo = ((x & 0x80u) << 8) | ((x & 0x7fu) << 7) | ((x & 0x8000u) << 16) | ((x & 0x7f00u) << 15);
    uint hi = ((x & 0x800000u) >> 8) | ((x & 0x7f0000u) >> 9) | (x & 0x80000000u) | ((x & 0x7f000000u) >> 1);
    vec2 a = unpackHalf2x16(lo), b = unpackHalf2x16(hi);
    f[4u * i] = (x & 0x7fu) == 0x7fu ? uintBitsToFloat(0x7fc00000u) : a.x;
    f[4u * i + 1u] = (x & 0x7f00u) == 0x7f00u ? uintBitsToFloat(0x7fc00000u) : a.y;
    f[4u * i + 2u] = (x & 0x7f0000u) == 0x7f0000u ? uintBitsToFloat(0x7fc00000u) : b.x;
    f[4u * i + 3u] = (x & 0x7f000000u) == 0x7f000000u ? uintBitsToFloat(0x7fc00000u) : b.y;
  }
#endif
}

// One butterfly stage over N values: invocations with bit o of their row-group lane set
// keep the upper half and send the lower half to their partner, which does the opposite.
#define RS_STAGE(v, HALF, o, upper)                                  \
  [[unroll]] for (uint i_ = 0u; i_ < (HALF); ++i_) {                 \
    float send_ = (upper) ? v[i_] : v[i_ + (HALF)];                  \
    float keep_ = (upper) ? v[i_ + (HALF)] : v[i_];                  \
    v[i_] = keep_ + subgroupShuffleXor(send_, (o));                  \
  }

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.mb_table * pc.Bs;
  if (gid == 0u) {  // uniform
    uint nq = wg_seq_validate(maxkv, pc.Qb, true);
    if (tid == 0u && nq != pc.NQ) flag_error(ERR_NQ);
  }
  uint nrun = (pc.mb_out + pc.bpw - 1u) / pc.bpw;
  if (gid >= pc.NQ * nrun) return;  // uniform
  uint n = gid / nrun, c0 = (gid % nrun) * pc.bpw;
  uint nbk = min(pc.bpw, pc.mb_out - c0);  // blocks c0 .. c0 + nbk - 1

  // Decode (one query block per sequence, so query block n is sequence n's): every
  // invocation reads the page of block c0 of sequence n (one address) and the block's
  // keys are requested before the batch lookup, which only confirms the guess. All Bs
  // rows of the guessed page are read (in bounds: page < P); rows past kv_len or the
  // causal limit are masked in the pooling, and rows never mix before it.
  uint spec_pg = INVALID;
  if (n < pc.B && c0 < pc.mb_table) {
    int pg = bt_d[pc.off_bt + n * pc.mb_table + c0];
    if (pg >= 0 && uint(pg) < pc.P) spec_pg = uint(pg);
  }

  // Roles by subgroup position: row group rg = lanes 8rg .. 8rg + 7 of one subgroup.
  uint vt = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  uint li = vt % LPR, rg = vt / LPR;
  uint cpr = pc.Di / E;  // chunks per key row (Di * element size / 16; NVFP4: Di / 16 groups)
  // After the reduce-scatter this invocation holds the logits of row `my_row`.
  uint voff = ((li & 4u) != 0u ? NI * HC / 2u : 0u) + ((li & 2u) != 0u ? NI * HC / 4u : 0u) +
              ((li & 1u) != 0u ? NI * HC / 8u : 0u);
  uint my_row = (voff / HC) * NRG + rg;

  // fp8 keys are decoded as value / 2^8, NVFP4 codes as value / 2^13: fold 2^8 / 2^13 into
  // qi (exact, a power of two).
  float qscale = KI_TYPE == DT_FP8 ? pc.scale * 256.0 : KI_TYPE == DT_FP4 ? pc.scale * 8192.0 : pc.scale;
  uint nsg = gl_NumSubgroups;
  KVEC kr[NI][CPL];  // this invocation's chunks of its NI rows of the block in flight
  float kscale = 1.0;
#if KI_TYPE == DT_FP4
  float ksg[NI];  // NVFP4: the e4m3 scale of this invocation's group (chunk li) per row
#endif
  float qv[HC][CPL][E];
  uint q_t = INVALID, q_h0 = INVALID;  // which (token, head group) qv holds

#if KI_TYPE == DT_FP4
  // The scale of group li of row r_ (CPL == 1: chunk li is group li); 0 past the row.
#define LOAD_GROUP_SCALE(it_, pg_, r_, nt_)                                           \
  ksg[it_] = 0.0;                                                                     \
  if ((r_) < (nt_) && li < cpr) ksg[it_] = fp8_to_f32(BYTE_AT(kis_b, pc.off_kis + ((pg_) * pc.Bs + (r_)) * cpr + li));
#define LOAD_ROW_SCALE(pg_, nt_)
#else
#define LOAD_GROUP_SCALE(it_, pg_, r_, nt_)
#define LOAD_ROW_SCALE(pg_, nt_) \
  if (pc.has_scale != 0u && my_row < (nt_)) kscale = kis_d[pc.off_kis + (pg_) * pc.Bs + my_row];
#endif
  // Issues the loads of the block in page pg_ with nt_ valid rows (the rest stay zero).
#define LOAD_PAGE(pg, nt)                                                             \
  {                                                                                   \
    uint pg_ = (pg), nt_ = (nt);                                                      \
    uint kb_ = pc.off_ki4 + pg_ * pc.Bs * cpr;                                       \
    [[unroll]] for (uint it = 0u; it < NI; ++it) {                                   \
      uint row_ = it * NRG + rg;                                                     \
      [[unroll]] for (uint cc = 0u; cc < CPL; ++cc) {                                \
        uint ch_ = li + LPR * cc;                                                    \
        kr[it][cc] = KVEC(0u);                                                       \
        if (row_ < nt_ && ch_ < cpr) kr[it][cc] = KI4(kb_ + row_ * cpr + ch_);       \
      }                                                                              \
      LOAD_GROUP_SCALE(it, pg_, row_, nt_)                                           \
    }                                                                                \
    kscale = 1.0;                                                                    \
    LOAD_ROW_SCALE(pg_, nt_)                                                         \
  }
  // qv <- heads h0 .. h0 + HC - 1 of token t, scaled.
#define LOAD_Q(t_, h0_)                                                               \
  {                                                                                   \
    [[unroll]] for (uint h = 0u; h < HC; ++h)                                        \
      [[unroll]] for (uint cc = 0u; cc < CPL; ++cc)                                  \
        [[unroll]] for (uint e = 0u; e < E; ++e) {                                   \
          uint d = (li + LPR * cc) * E + e;                                          \
          qv[h][cc][e] = 0.0;                                                        \
          if ((h0_) + h < pc.Hi && d < pc.Di)                                        \
            qv[h][cc][e] = LD(QI_TYPE, qi_d, pc.off_qi + ((t_) * pc.Hi + (h0_) + h) * pc.Di + d) * qscale; \
        }                                                                            \
    q_t = (t_);                                                                      \
    q_h0 = (h0_);                                                                    \
  }
  // Block jj of the run (rows past kv_len are not read).
#define LOAD_BLOCK(jj) LOAD_PAGE(sh_page[jj], min(pc.Bs, kvl - (c0 + (jj)) * pc.Bs))
  if (spec_pg != INVALID) LOAD_PAGE(spec_pg, pc.Bs)  // uniform: one address for all
  // Decode also means token n: its query is staged in shared memory now, by the whole
  // workgroup (a few loads each instead of HC * CPL * E), published by the barriers of
  // the lookup, and reloaded below if the token differs.
  if (n < pc.T) {  // uniform
    for (uint i = tid; i < HC * 32u; i += WGS) {
      uint h = i / 32u, d0 = (i % 32u) * 4u;
      vec4 x = vec4(0.0);
      if (h < pc.Hi)
        [[unroll]] for (uint e = 0u; e < 4u; ++e)
          if (d0 + e < pc.Di) x[e] = LD(QI_TYPE, qi_d, pc.off_qi + (n * pc.Hi + h) * pc.Di + d0 + e) * qscale;
      sh_q0[i] = x;
    }
  }

  SeqLookup lk = wg_seq_lookup(n, false, maxkv, pc.Qb);  // uniform
  int p0 = 0, p1 = -1;
  if (lk.found) {
    int blk = lk.s.pos0 / int(pc.Qb) + int(n - lk.qb0);
    p0 = max(lk.s.pos0, blk * int(pc.Qb));
    p1 = min(lk.s.pos0 + lk.s.qlen - 1, blk * int(pc.Qb) + int(pc.Qb) - 1);
  }
  uint kvl = uint(lk.s.kvl);
  if (n < pc.T) {  // uniform; sh_q0 was published by the lookup's barriers
    [[unroll]] for (uint h = 0u; h < HC; ++h)
      [[unroll]] for (uint cc = 0u; cc < CPL; ++cc)
        [[unroll]] for (uint e4 = 0u; e4 < E / 4u; ++e4) {
          vec4 x = sh_q0[h * 32u + ((li + LPR * cc) * E) / 4u + e4];
          [[unroll]] for (uint e = 0u; e < 4u; ++e) qv[h][cc][4u * e4 + e] = x[e];
        }
    q_t = n;
    q_h0 = 0u;
  }
  if (tid < nbk) {
    uint c = c0 + tid, page = INVALID;
    if (lk.found && c * pc.Bs < kvl && int(c * pc.Bs) <= p1) {
      int pg = bt_d[pc.off_bt + lk.b * pc.mb_table + c];
      if (pg < 0 || uint(pg) >= pc.P) flag_error(ERR_BLOCK_TABLE);
      else page = uint(pg);
    }
    sh_page[tid] = page;
  }
  barrier();
  // Blocks without work (past the sequence or the causal limit, bad page): -inf.
  for (uint i = tid; i < nbk * pc.Hi; i += WGS) {
    uint j = i / pc.Hi, h = i % pc.Hi;
    if (sh_page[j] == INVALID) out_d[pc.off_out + (n * pc.Hi + h) * pc.mb_out + c0 + j] = NEG_INF;
  }

  uint j = 0u;
  while (j < nbk && sh_page[j] == INVALID) ++j;
  // The guess holds when the first block with work is block c0 of sequence n in the
  // guessed page (uniform: shared and broadcast values).
  bool spec_ok = j == 0u && lk.b == n && sh_page[0] == spec_pg;
  if (j < nbk && !spec_ok) LOAD_BLOCK(j)
  while (j < nbk) {  // uniform
    uint c = c0 + j, s0 = c * pc.Bs;
    uint ntok = min(pc.Bs, kvl - s0);  // valid slots of the block
    float ks = kscale;
    uint jn = j + 1u;
    while (jn < nbk && sh_page[jn] == INVALID) ++jn;
    for (uint h0 = 0u; h0 < pc.Hi; h0 += HC) {
      float best = NEG_INF;  // meaningful in invocation tid = h < HC
      for (int p = max(p0, int(s0)); p <= p1; ++p) {  // uniform
        uint t = uint(lk.s.q0 + (p - lk.s.pos0));
        uint lim = min(ntok - 1u, uint(p) - s0);  // last valid row for this query (causal)
        if (t != q_t || h0 != q_h0) LOAD_Q(t, h0)
        float v[NI * HC];
        [[unroll]] for (uint it = 0u; it < NI; ++it) {
          float a[HC];
          [[unroll]] for (uint h = 0u; h < HC; ++h) a[h] = 0.0;
          [[unroll]] for (uint cc = 0u; cc < CPL; ++cc) {
            float kf[E];
            unpack_keys(kr[it][cc], kf);
#if KI_TYPE == DT_FP4
            [[unroll]] for (uint h = 0u; h < HC; ++h) {
              float part = 0.0;
              [[unroll]] for (uint e = 0u; e < E; ++e) part += qv[h][cc][e] * kf[e];
              a[h] += ksg[it] * part;
            }
#else
            [[unroll]] for (uint h = 0u; h < HC; ++h)
              [[unroll]] for (uint e = 0u; e < E; ++e) a[h] += qv[h][cc][e] * kf[e];
#endif
          }
          [[unroll]] for (uint h = 0u; h < HC; ++h) v[it * HC + h] = a[h];
        }
        // The keys of this block are consumed: request the next block's now (uniform).
        if (h0 + HC >= pc.Hi && p == p1 && jn < nbk) LOAD_BLOCK(jn)
        RS_STAGE(v, NI * HC / 2u, 4u, (li & 4u) != 0u)
        RS_STAGE(v, NI * HC / 4u, 2u, (li & 2u) != 0u)
        RS_STAGE(v, NI * HC / 8u, 1u, (li & 1u) != 0u)
        // v[h] is the logit of (my_row, h0 + h); pool over the block's valid rows.
        bool valid = my_row <= lim;
        [[unroll]] for (uint h = 0u; h < HC; ++h) {
          float l = valid ? v[h] * ks : NEG_INF;
          // A valid NaN logit makes the pooled value NaN (docs/spec.md): the subgroup
          // stores NaN as its maximum, the other logits pool as usual.
          float nan_l = subgroupMax(isnan(l) ? 1.0 : 0.0);
          if (isnan(l)) l = NEG_INF;
          float m = subgroupMax(l);
          if (pc.pool_lse != 0u) {
            float e = m == NEG_INF || l == NEG_INF ? 0.0 : exp(l - m);
            float sum = subgroupAdd(e);
            if (subgroupElect()) sh_s[gl_SubgroupID * HC + h] = sum;
          }
          if (subgroupElect()) sh_m[gl_SubgroupID * HC + h] = nan_l > 0.0 ? QNAN : m;
        }
        barrier();
        if (tid < HC) {
          float m = NEG_INF;
          bool nan = false;
          for (uint i = 0u; i < nsg; ++i) {
            float mi = sh_m[i * HC + tid];
            if (isnan(mi)) nan = true;
            else m = max(m, mi);
          }
          float pooled = m;
          if (pc.pool_lse != 0u && m != NEG_INF) {
            float sum = 0.0;
            for (uint i = 0u; i < nsg; ++i) {
              float mi = sh_m[i * HC + tid];
              if (mi != NEG_INF && !isnan(mi)) sum += sh_s[i * HC + tid] * exp(mi - m);
            }
            pooled = m + log(sum);
          }
          if (nan) pooled = QNAN;
          best = isnan(best) || isnan(pooled) ? QNAN : max(best, pooled);
        }
        barrier();  // sh_m / sh_s are rewritten for the next query
      }
      if (tid < HC && h0 + tid < pc.Hi) out_d[pc.off_out + (n * pc.Hi + h0 + tid) * pc.mb_out + c] = best;
    }
    j = jn;
  }
}
