#version 450
#extension GL_GOOGLE_include_directive : require
// Device-to-device copy of 16-byte units (VulkanStream::copy for large aligned copies):
// each invocation moves PER uvec4 at stride WGS, all loads in flight before the stores,
// one workgroup per WGS * PER units (a grid over the whole copy: many workgroups per SM
// keep enough bytes in flight). vkCmdCopyBuffer on a compute queue may run on a copy
// engine, which on the H200 reached ~0.85 TB/s of its ~4.2.
#define WGS 256
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_src, off_dst;  // in 16-byte units from the bound ranges
  uint n;                 // 16-byte units to copy
} pc;

layout(std430, binding = 1) readonly buffer SrcBuf { uvec4 src4[]; };
layout(std430, binding = 2) writeonly buffer DstBuf { uvec4 dst4[]; };

#define PER 4u

void main() {
  uint base = wg_linear() * (WGS * PER) + gl_LocalInvocationID.x;
  uvec4 v0 = uvec4(0u), v1 = uvec4(0u), v2 = uvec4(0u), v3 = uvec4(0u);
  bool a0 = base < pc.n, a1 = base + WGS < pc.n, a2 = base + 2u * WGS < pc.n, a3 = base + 3u * WGS < pc.n;
  if (a0) v0 = src4[pc.off_src + base];
  if (a1) v1 = src4[pc.off_src + base + WGS];
  if (a2) v2 = src4[pc.off_src + base + 2u * WGS];
  if (a3) v3 = src4[pc.off_src + base + 3u * WGS];
  if (a0) dst4[pc.off_dst + base] = v0;
  if (a1) dst4[pc.off_dst + base + WGS] = v1;
  if (a2) dst4[pc.off_dst + base + 2u * WGS] = v2;
  if (a3) dst4[pc.off_dst + base + 3u * WGS] = v3;
}
