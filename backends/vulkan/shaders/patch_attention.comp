#version 450
#extension GL_GOOGLE_include_directive : require
// patch_attention_3d: bidirectional attention inside windows of `window` temporal
// patches of each visual item. One workgroup per (token i, head h). A_TYPE: dtype of
// q, k, v and out.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_q, off_k, off_v, off_items, off_out, off_lse;
  uint N, H, D, n_items, window;
  float scale;
} pc;

layout(std430, binding = 1) readonly buffer QBuf { STORAGE(A_TYPE) q_d[]; };
layout(std430, binding = 2) readonly buffer KBuf { STORAGE(A_TYPE) k_d[]; };
layout(std430, binding = 3) readonly buffer VBuf { STORAGE(A_TYPE) v_d[]; };
layout(std430, binding = 4) readonly buffer ItemBuf { int items_d[]; };
layout(std430, binding = 5) writeonly buffer OutBuf { STORAGE(A_TYPE) out_d[]; };
layout(std430, binding = 6) writeonly buffer LseBuf { float lse_d[]; };

#define K_AT(i) LD(A_TYPE, k_d, pc.off_k + (i))
#define V_AT(i) LD(A_TYPE, v_d, pc.off_v + (i))
#include "attn_core.glsl"

// Grid of item it; false when a size is < 1 or the item overruns the N - first tokens left.
bool item_grid(uint it, uint first, out uint gt, out uint hw) {
  int a = items_d[pc.off_items + it * 3u];
  int bh = items_d[pc.off_items + it * 3u + 1u];
  int bw = items_d[pc.off_items + it * 3u + 2u];
  gt = 0u;
  hw = 1u;
  if (a < 1 || bh < 1 || bw < 1) return false;
  uint left = pc.N - first;
  if (uint(bh) > left / uint(bw)) return false;
  hw = uint(bh) * uint(bw);
  if (uint(a) > left / hw) return false;
  gt = uint(a);
  return true;
}

void main() {
  uint gid = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  if (gid == 0u && tid == 0u) {
    uint first = 0u;
    bool good = true;
    for (uint it = 0u; it < pc.n_items && good; ++it) {
      uint gt, hw;
      good = item_grid(it, first, gt, hw);
      first += gt * hw;
    }
    if (!good || first != pc.N) flag_error(ERR_ITEMS);
  }
  if (gid >= pc.N * pc.H) return;
  uint i = gid / pc.H, h = gid % pc.H;
  attn_begin(pc.off_q + (i * pc.H + h) * pc.D, pc.D, pc.scale);

  // Find the item and window of token i (items are few: a linear walk).
  uint first = 0u, w_begin = 0u, w_end = 0u;
  for (uint it = 0u; it < pc.n_items; ++it) {
    uint gt, hw;
    if (!item_grid(it, first, gt, hw)) break;
    uint size = gt * hw;
    if (i < first + size) {
      uint w0 = (i - first) / hw / pc.window * pc.window;  // first temporal patch of the window
      w_begin = first + w0 * hw;
      w_end = first + min(w0 + pc.window, gt) * hw;
      break;
    }
    first += size;
  }
  for (uint s0 = w_begin; s0 < w_end; s0 += WGS) {
    uint s = s0 + tid;
    attn_tile(s < w_end, (s * pc.H + h) * pc.D, min(uint(WGS), w_end - s0));
  }
  attn_finish();
  uint o = pc.off_out + (i * pc.H + h) * pc.D;
  [[unroll]] for (uint j = 0u; j < DPT; ++j) {
    uint d = tid + j * WGS;
    if (d < pc.D) ST(A_TYPE, out_d, o + d, attn_out(j));
  }
  if (tid == 0u) lse_d[pc.off_lse + i * pc.H + h] = attn_lse();
}
