// Included first by every shader (after #version and the include extension).
// Workgroup size, the device error flags, workgroup ids, element types, reductions.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef WGS
#define WGS 128
#endif
layout(local_size_x = WGS, local_size_y = 1, local_size_z = 1) in;

// ---- device error flags (mirror of backends/vulkan/device_errors.h) ------------------
#define ERR_CU_Q 1u
#define ERR_KV_LEN 2u
#define ERR_BLOCK_TABLE 4u
#define ERR_NQ 8u
#define ERR_K 16u
#define ERR_IDS 32u
#define ERR_ITEMS 64u
#define ERR_PLACEHOLDERS 128u
#define ERR_LOOPS 256u

// The word of this op in the error buffer (the host sets it to the OpId).
layout(constant_id = 0) const uint ERR_SLOT = 0;
layout(std430, binding = 0) buffer ErrorFlags { uint err_words[]; };
void flag_error(uint bits) { atomicOr(err_words[ERR_SLOT], bits); }

// lavapipe (llvmpipe) silently ends every loop of an invocation once 65535 loop
// iterations have run in it, all loops together (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS).
// Shaders whose loop counts grow with the inputs call this last: past the limit its loop
// of two iterations runs one, and ERR_LOOPS turns the incomplete result into an error.
void flag_cut_loops() {
  uint n = 0u;
  for (uint i = gl_NumWorkGroups.z; i < gl_NumWorkGroups.z + 2u; ++i) ++n;
  if (n != 2u) flag_error(ERR_LOOPS);
}

// The linear workgroup id of a dispatch split over x and y (see launch.h).
uint wg_linear() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

#define NEG_INF uintBitsToFloat(0xff800000u)
#define POS_INF uintBitsToFloat(0x7f800000u)
#define QNAN uintBitsToFloat(0x7fc00000u)
#define INVALID 0xffffffffu

#include "dtype.glsl"
#include "reduce.glsl"
