#version 450
#extension GL_GOOGLE_include_directive : require
// Step 3 of the inverse index (backends/vulkan/block_inverse.h), one invocation per
// entry: places each entry in its bucket's range of the entry list, counting the bucket
// back down to 0. The order within a bucket is the order of the atomics; step 4 sorts it.
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint n_entries, ws_bucket, ws_count, ws_begin, ws_entry;
} pc;

layout(std430, binding = 1) buffer WsBuf { uint ws[]; };

void main() {
  uint e = wg_linear() * WGS + gl_LocalInvocationID.x;
  if (e >= pc.n_entries) return;
  uint b = ws[pc.ws_bucket + e];
  if (b == INVALID) return;
  uint left = atomicAdd(ws[pc.ws_count + b], 0xffffffffu);  // this entry takes slot left - 1
  if (left > 0u) ws[pc.ws_entry + ws[pc.ws_begin + b] + left - 1u] = e;
}
