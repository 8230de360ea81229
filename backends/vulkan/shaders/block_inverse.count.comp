#version 450
#extension GL_GOOGLE_include_directive : require
// Step 1 of the inverse index of the training kernels (backends/vulkan/block_inverse.h):
// one workgroup per row - a query block with its Hs * K block_idx entries (sparse), or a
// sequence with its max_blocks logical blocks (dense). Writes the row's tokens to the
// workspace and the bucket of each entry (the page, or page * Hs + selection head with
// head_buckets; INVALID for an entry that no token of the row attends: padding, a block
// past the sequence or after the row's last position, a bad page id) and counts the
// entries of every bucket (integer atomics: the counts do not depend on the order).
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_bt, off_kvlen, off_cuq, off_idx;
  uint T, B, P, Bs, max_blocks, Qb, NQ, Hs, K;
  uint sparse, head_buckets;
  uint ws_rows, ws_bucket, ws_count;
} pc;

layout(std430, binding = 1) readonly buffer BtBuf { int bt_d[]; };
layout(std430, binding = 2) readonly buffer KvlBuf { int kvlen_d[]; };
layout(std430, binding = 3) readonly buffer CuqBuf { int cuq_d[]; };
layout(std430, binding = 4) readonly buffer IdxBuf { int idx_d[]; };
layout(std430, binding = 5) buffer WsBuf { uint ws[]; };

#define CU_Q(i) cuq_d[pc.off_cuq + (i)]
#define KV_LEN(i) kvlen_d[pc.off_kvlen + (i)]
#define SEQ_B pc.B
#define SEQ_T pc.T
#include "seq.glsl"
#include "seq_wg.glsl"

void main() {
  uint r = wg_linear();
  uint tid = gl_LocalInvocationID.x;
  uint maxkv = pc.max_blocks * pc.Bs;
  if (r >= (pc.sparse != 0u ? pc.NQ : pc.B)) return;  // uniform
  uint b = 0u;
  int t0 = 0, p0 = 0, ntok = 0, kvl = 0;
  if (pc.sparse != 0u) {
    SeqLookup lk = wg_seq_lookup(r, false, maxkv, pc.Qb);
    if (lk.found) {
      int blk = lk.s.pos0 / int(pc.Qb) + int(r - lk.qb0);
      p0 = max(lk.s.pos0, blk * int(pc.Qb));
      int p1 = min(lk.s.pos0 + lk.s.qlen - 1, blk * int(pc.Qb) + int(pc.Qb) - 1);
      b = lk.b;
      t0 = lk.s.q0 + (p0 - lk.s.pos0);
      ntok = max(p1 - p0 + 1, 0);
      kvl = lk.s.kvl;
    }
  } else {
    SeqInfo s = seq_info(r, maxkv);
    if (s.ok) {
      b = r;
      t0 = s.q0;
      p0 = s.pos0;
      ntok = s.qlen;
      kvl = s.kvl;
    }
  }
  if (tid == 0u) {
    uint o = pc.ws_rows + r * 4u;
    ws[o] = uint(t0);
    ws[o + 1u] = uint(p0);
    ws[o + 2u] = uint(ntok);
    ws[o + 3u] = uint(kvl);
  }
  uint L = pc.sparse != 0u ? pc.Hs * pc.K : pc.max_blocks;
  uint nblk = (uint(kvl) + pc.Bs - 1u) / pc.Bs;
  uint last = uint(p0 + ntok - 1);  // the row's last position (ntok > 0)
  for (uint i = tid; i < L; i += WGS) {
    uint e = r * L + i;
    uint bucket = INVALID;
    int c = pc.sparse != 0u ? idx_d[pc.off_idx + e] : int(i);
    if (ntok > 0 && c >= 0 && uint(c) < nblk && uint(c) * pc.Bs <= last) {
      int page = bt_d[pc.off_bt + b * pc.max_blocks + uint(c)];
      if (page >= 0 && uint(page) < pc.P) bucket = pc.head_buckets != 0u ? uint(page) * pc.Hs + i / pc.K : uint(page);
    }
    ws[pc.ws_bucket + e] = bucket;
    if (bucket != INVALID) atomicAdd(ws[pc.ws_count + bucket], 1u);
  }
}
