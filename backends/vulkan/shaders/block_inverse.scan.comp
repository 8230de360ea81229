#version 450
#extension GL_GOOGLE_include_directive : require
// Step 2 of the inverse index (backends/vulkan/block_inverse.h), one workgroup: the
// exclusive prefix sums of the buckets' entry counts, begin[0 .. n_buckets].
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint n_buckets, ws_count, ws_begin;
} pc;

layout(std430, binding = 1) buffer WsBuf { uint ws[]; };

void main() {
  uint tid = gl_LocalInvocationID.x;
  uint carry = 0u;
  for (uint b0 = 0u; b0 < pc.n_buckets; b0 += WGS) {  // uniform
    uint b = b0 + tid;
    uint v = b < pc.n_buckets ? ws[pc.ws_count + b] : 0u;
    uint total;
    uint before = wg_exclusive_scan(v, total);
    if (b < pc.n_buckets) ws[pc.ws_begin + b] = carry + before;
    carry += total;
  }
  if (tid == 0u) ws[pc.ws_begin + pc.n_buckets] = carry;
}
