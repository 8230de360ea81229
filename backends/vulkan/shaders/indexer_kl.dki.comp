#version 450
#extension GL_GOOGLE_include_directive : require
// dki_cache of indexer_kl: one workgroup per page zeroes its [Bs][Di] slab, then walks the
// inverse index's entries that attended the page in row order (slab_walk.glsl) and, for
// each token t and selection head g of the entry, adds w (u - p)(s) qi[t][g] to each
// attended slot s (w = dkl * scale_i, u from the per-row pass's max and sum, p the target
// of indexer_kl.glsl), in tiles: each invocation scores one slot, then owns fixed
// elements of the slab. No atomics: the order of every sum is fixed by the inputs. Slots
// no query attended stay 0. QI_TYPE: qi; KI_TYPE: ki_cache; A_TYPE: q and k_cache.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_qi, off_ki, off_q, off_k, off_lse, off_idx, off_dkl, off_dki;
  uint ws_rows, ws_begin, ws_entry, ws_lse_u;
  uint Hq, Hkv, D, P, Bs, max_blocks, K, Hs, Di, sparse, has_dkl;
  float scale, scale_i;
} pc;

layout(std430, binding = 1) readonly buffer QiBuf { STORAGE(QI_TYPE) qi_d[]; };
layout(std430, binding = 2) readonly buffer KiBuf { STORAGE(KI_TYPE) ki_d[]; };
layout(std430, binding = 3) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 4) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 5) readonly buffer LseBuf { float lse_d[]; };
layout(std430, binding = 6) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 7) readonly buffer DklBuf { float dkl_d[]; };
layout(std430, binding = 8) readonly buffer WsBuf { uint ws[]; };
layout(std430, binding = 9) buffer DkiBuf { float dki_d[]; };

#include "indexer_kl.glsl"

shared float sh_c[WGS];

void visit_token(uint e, uint c, uint t, uint n_slots) {
  uint tid = gl_LocalInvocationID.x;
  uint page = wg_linear();
  uint slab = pc.off_dki + page * pc.Bs * pc.Di;
  // Sparse: the entry's selection head; dense: every head attends every causal token.
  uint g0 = pc.sparse != 0u ? (e / pc.K) % pc.Hs : 0u;
  uint g1 = pc.sparse != 0u ? g0 + 1u : pc.Hs;
  for (uint g = g0; g < g1; ++g) {
    uint row = t * pc.Hs + g;
    float m = uintBitsToFloat(ws[pc.ws_lse_u + 2u * row]), l = uintBitsToFloat(ws[pc.ws_lse_u + 2u * row + 1u]);
    if (!(l > 0.0)) continue;  // uniform: an empty token set
    float w = (pc.has_dkl != 0u ? dkl_d[pc.off_dkl + row] : 1.0) * pc.scale_i;
    kl_load_qi(t, g);
    for (uint j0 = 0u; j0 < n_slots; j0 += WGS) {
      uint j = j0 + tid;
      float coeff = 0.0;
      if (j < n_slots) coeff = w * (exp(kl_logit(page, j) - m) / l - kl_target(t, g, page, j));
      sh_c[tid] = coeff;
      barrier();
      // Element x of this tile is slab element j0 * Di + x: always the same invocation.
      uint n = min(uint(WGS), n_slots - j0) * pc.Di;
      for (uint x0 = 0u; x0 < n; x0 += 32u * WGS) {
        [[unroll]] for (uint u = 0u; u < 32u; ++u) {
          uint x = x0 + u * WGS + tid;
          if (x < n) dki_d[slab + j0 * pc.Di + x] += sh_c[x / pc.Di] * sh_qi[x % pc.Di];
        }
      }
      barrier();
    }
  }
}

#include "slab_walk.glsl"

void main() {
  uint page = wg_linear();
  if (page >= pc.P) return;
  uint n = pc.Bs * pc.Di;
  // Zeroed by the invocations that accumulate them (WGS divides j0 * Di).
  for (uint x = gl_LocalInvocationID.x; x < n; x += WGS) dki_d[pc.off_dki + page * n + x] = 0.0;
  slab_walk(page);
  flag_cut_loops();
}
