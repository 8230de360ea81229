#version 450
#extension GL_GOOGLE_include_directive : require
// dk_cache / dv_cache of sparse_block_attention_backward (sparse = 1) and
// dense_attention_backward: one workgroup per (page, KV head g) slab zeroes it, then
// walks the inverse index's entries that attended it in row order (slab_walk.glsl) and,
// for each token and each query head of g whose lse is finite, adds
// dk_s += scale * ds_s * q and dv_s += p_s * dout over the token's slots, in tiles: each
// invocation scores one slot, then owns fixed elements of the slab. No atomics: the order
// of every sum is fixed by the inputs. Slots no query attended stay 0. A_TYPE: dtype of
// q, the caches and dout; delta comes from the dq pass.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_q, off_k, off_v, off_idx, off_dout, off_lse, off_dk, off_dv;
  uint ws_rows, ws_begin, ws_entry, ws_delta;
  uint Hq, Hkv, D, P, Bs, max_blocks, K, Hs, sparse, head_buckets;
  float scale;
} pc;

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 3) readonly buffer VBuf { STORAGE(A_TYPE) v_d[]; };
layout(std430, binding = 4) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 5) readonly buffer DoutBuf { STORAGE(A_TYPE) dout_d[]; };
layout(std430, binding = 6) readonly buffer LseBuf { float lse_d[]; };
layout(std430, binding = 7) readonly buffer WsBuf { uint ws[]; };
layout(std430, binding = 8) buffer DkBuf { float dk_d[]; };
layout(std430, binding = 9) buffer DvBuf { float dv_d[]; };

#define K_AT(i) LD(A_TYPE, k_d, pc.off_k + (i))
#define V_AT(i) LD(A_TYPE, v_d, pc.off_v + (i))
#define Q_LOAD(i) LD(A_TYPE, q_d, i)
#define DO_LOAD(i) LD(A_TYPE, dout_d, i)
#include "attn_backward.glsl"

shared float sh_p[WGS];
shared float sh_ds[WGS];

uint slab_base;  // element offset of the slab in the caches and their gradients

void visit_token(uint e, uint c, uint t, uint n_slots) {
  uint tid = gl_LocalInvocationID.x;
  uint g = wg_linear() % pc.Hkv, G = pc.Hq / pc.Hkv;
  for (uint h = g * G; h < g * G + G; ++h) {
    uint row = t * pc.Hq + h;
    float lse = lse_d[pc.off_lse + row];
    if (lse == NEG_INF) continue;  // uniform: the row attended nothing
    float delta = uintBitsToFloat(ws[pc.ws_delta + row]);
    barrier();  // the previous row's use of bw_q / bw_do is done
    bw_load_row(pc.off_q + row * pc.D, pc.off_dout + row * pc.D, pc.D);
    for (uint j0 = 0u; j0 < n_slots; j0 += WGS) {
      uint j = j0 + tid;
      float p = 0.0, ds = 0.0;
      if (j < n_slots) bw_p_ds(slab_base + j * pc.D, pc.D, pc.scale, lse, delta, p, ds);
      sh_p[tid] = p;
      sh_ds[tid] = pc.scale * ds;
      barrier();
      // Element x of this tile is slab element j0 * D + x: always the same invocation.
      uint n = min(uint(WGS), n_slots - j0) * pc.D;
      for (uint x0 = 0u; x0 < n; x0 += 32u * WGS) {
        [[unroll]] for (uint u = 0u; u < 32u; ++u) {
          uint x = x0 + u * WGS + tid;
          if (x < n) {
            uint i = slab_base + j0 * pc.D + x;
            dk_d[pc.off_dk + i] += sh_ds[x / pc.D] * bw_q[x % pc.D];
            dv_d[pc.off_dv + i] += sh_p[x / pc.D] * bw_do[x % pc.D];
          }
        }
      }
      barrier();
    }
  }
}

#include "slab_walk.glsl"

void main() {
  uint slab = wg_linear();
  if (slab >= pc.P * pc.Hkv) return;
  uint page = slab / pc.Hkv, g = slab % pc.Hkv;
  uint n = pc.Bs * pc.D;
  slab_base = slab * n;
  // Zeroed by the invocations that accumulate them (WGS divides j0 * D).
  for (uint x = gl_LocalInvocationID.x; x < n; x += WGS) {
    dk_d[pc.off_dk + slab_base + x] = 0.0;
    dv_d[pc.off_dv + slab_base + x] = 0.0;
  }
  slab_walk(pc.head_buckets != 0u ? page * pc.Hs + g : page);
  flag_cut_loops();
}
