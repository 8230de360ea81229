// The probability and logit gradient of one query row against one key/value row, shared
// by the attention backward shaders (docs/training.md): p = exp(scale * q.k - lse),
// ds = p * (dout.v - delta) with delta = dot(dout, out). The includer defines A_TYPE,
// K_AT(i) / V_AT(i) (element i of K / V as float, offsets applied) and loads the query
// row into bw_q and its dout into bw_do (D <= MAX_D), in f32.
#define MAX_D 256
#define DPT (MAX_D / WGS)

shared float bw_q[MAX_D];
shared float bw_do[MAX_D];

// Loads D elements from element q_off of q_at and do_off of dout into bw_q / bw_do (call
// from uniform control flow; ends with a barrier). The macros Q_LOAD(i) / DO_LOAD(i) read
// element i of the includer's q and dout buffers.
void bw_load_row(uint q_off, uint do_off, uint D) {
  [[unroll]] for (uint x = 0u; x < DPT; ++x) {
    uint d = gl_LocalInvocationID.x + x * WGS;
    if (d < D) {
      bw_q[d] = Q_LOAD(q_off + d);
      bw_do[d] = DO_LOAD(do_off + d);
    }
  }
  barrier();
}

// p and ds of the loaded row against the key and value rows at element kv_off.
void bw_p_ds(uint kv_off, uint D, float scale, float lse, float delta, out float p, out float ds) {
  float qk = 0.0, dv = 0.0;
  // In unrolled runs of 64 dims: lavapipe counts every loop iteration (common.glsl).
  for (uint d0 = 0u; d0 < D; d0 += 64u) {
    [[unroll]] for (uint u = 0u; u < 64u; ++u) {
      uint d = d0 + u;
      if (d < D) {
        qk += bw_q[d] * K_AT(kv_off + d);
        dv += bw_do[d] * V_AT(kv_off + d);
      }
    }
  }
  p = exp(scale * qk - lse);
  ds = p * (dv - delta);
}
