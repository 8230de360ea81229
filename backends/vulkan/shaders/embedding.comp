#version 450
#extension GL_GOOGLE_include_directive : require
// embedding: y[t][h] = table[ids[t]][h], one invocation per element of y. An id outside
// [0, V) is flagged and its row written as 0. T_TYPE: dtype of table; Y_TYPE: of y.
#define WGS 256
#include "common.glsl"

layout(push_constant) uniform PushConstants {
  uint off_table, off_ids, off_y;
  uint V, H, T;
} pc;

layout(std430, binding = 1) readonly buffer TBuf { STORAGE(T_TYPE) table_d[]; };
layout(std430, binding = 2) readonly buffer IdBuf { int ids_d[]; };
layout(std430, binding = 3) writeonly buffer YBuf { STORAGE(Y_TYPE) y_d[]; };

void main() {
  uint i = wg_linear() * WGS + gl_LocalInvocationID.x;
  if (i >= pc.T * pc.H) return;
  uint t = i / pc.H, h = i % pc.H;
  int id = ids_d[pc.off_ids + t];
  float v = 0.0;
  if (id < 0 || uint(id) >= pc.V) {
    if (h == 0u) flag_error(ERR_IDS);
  } else {
    v = LD(T_TYPE, table_d, pc.off_table + uint(id) * pc.H + h);
  }
  ST(Y_TYPE, y_d, pc.off_y + i, v);
}
