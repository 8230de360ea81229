#version 450
#extension GL_GOOGLE_include_directive : require
// Step 4 of the inverse index (backends/vulkan/block_inverse.h), one workgroup per bucket:
// sorts the bucket's entries ascending in place (a bitonic network over the next power of
// two, the missing elements +inf and never moved), so each bucket lists its entries in
// row order whatever the order of step 3's atomics. Entries are distinct, so the result
// is unique.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint n_buckets, ws_begin, ws_entry;
} pc;

layout(std430, binding = 1) coherent buffer WsBuf { uint ws[]; };

void main() {
  uint b = wg_linear();
  if (b >= pc.n_buckets) return;
  uint tid = gl_LocalInvocationID.x;
  uint base = pc.ws_entry + ws[pc.ws_begin + b];
  uint n = ws[pc.ws_begin + b + 1u] - ws[pc.ws_begin + b];
  uint N = 1u;
  while (N < n) N <<= 1u;
  for (uint k = 2u; k <= N; k <<= 1u) {
    for (uint j = k >> 1u; j > 0u; j >>= 1u) {
      for (uint x = tid; x < N / 2u; x += WGS) {
        // Every comparator puts the smaller value at the lower index: the first step of a
        // stage compares mirrored pairs of each k-run, the others pairs j apart.
        uint lo, hi;
        if (j == k >> 1u) {
          uint run = x / j, o = x % j;
          lo = run * k + o;
          hi = run * k + k - 1u - o;
        } else {
          lo = (x / j) * 2u * j + x % j;
          hi = lo + j;
        }
        if (hi < n) {
          uint a = ws[base + lo], c = ws[base + hi];
          if (a > c) {
            ws[base + lo] = c;
            ws[base + hi] = a;
          }
        }
      }
      memoryBarrierBuffer();
      barrier();
    }
  }
  flag_cut_loops();
}
