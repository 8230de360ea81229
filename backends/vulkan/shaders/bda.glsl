// Reads of 16-byte (and 8-byte) units through a buffer device address (the BDA=1 variants, for
// tensors larger than maxStorageBufferRange). Included after common.glsl.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer U4Ref { uvec4 v; };
// uvec4 number i (32-bit: up to 64 GiB) of the tensor whose first byte is at `base`.
#define U4_AT(base, i) U4Ref((base) + uint64_t(i) * 16ul).v
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer U2Ref { uvec2 v; };
// uvec2 number i (8-byte units: NVFP4 key rows) of the tensor whose first byte is at `base`.
#define U2_AT(base, i) U2Ref((base) + uint64_t(i) * 8ul).v
