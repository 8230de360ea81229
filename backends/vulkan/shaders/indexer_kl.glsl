// The two distributions of indexer_kl (docs/training.md) at one attended slot, shared by
// its per-row and per-page shaders. The includer declares pc (with off_q, off_k, off_lse,
// Hq, Hkv, D, Bs, Hs, Di, scale, scale_i), q_d / k_d (A_TYPE), lse_d (float), ki_d
// (KI_TYPE), and loads the indexer query row into sh_qi (Di <= MAX_DI floats).
#define MAX_DI 256

shared float sh_qi[MAX_DI];

// The target p(s) of token t, selection head g at slot j of `page`: the mean over the
// group's Hq / Hs query heads of exp(scale * q.k - lse), each head against its own KV
// head (per_kv_head: the heads of KV head g; shared: every head). A head whose lse is
// -inf adds nothing.
float kl_target(uint t, uint g, uint page, uint j) {
  uint G = pc.Hq / pc.Hkv, nh = pc.Hq / pc.Hs;
  float sum = 0.0;
  for (uint h = g * nh; h < g * nh + nh; ++h) {
    float l = lse_d[pc.off_lse + t * pc.Hq + h];
    if (l == NEG_INF) continue;
    uint qo = pc.off_q + (t * pc.Hq + h) * pc.D, ko = pc.off_k + ((page * pc.Hkv + h / G) * pc.Bs + j) * pc.D;
    // q.k as a compensated dot product (Ogita, Rump and Oishi's Dot2: error-free products
    // by fma, error-free sums by TwoSum), so it rounds as the exactly computed score does:
    // where lse is a lone slot's own score the argument is exactly 0 and p = 1, as in the
    // f64 reference, instead of an ulp away from it. In unrolled runs of 64 dims: lavapipe
    // counts every loop iteration (common.glsl).
    float qk = 0.0, err = 0.0;
    for (uint d0 = 0u; d0 < pc.D; d0 += 64u)
      [[unroll]] for (uint u = 0u; u < 64u; ++u)
        if (d0 + u < pc.D) {
          float a = LD(A_TYPE, q_d, qo + d0 + u), b = LD(A_TYPE, k_d, ko + d0 + u);
          precise float prod = a * b;
          precise float prod_err = fma(a, b, -prod);
          precise float s = qk + prod;
          precise float bv = s - qk;
          precise float sum_err = (qk - (s - bv)) + (prod - bv);
          qk = s;
          err += sum_err + prod_err;
        }
    float arg = pc.scale * (qk + err) - l;
    // exp(0) = 1 exactly (GLSL allows exp a few ulp of error even there).
    sum += arg == 0.0 ? 1.0 : exp(arg);
  }
  return sum / float(nh);
}

// The student's logit scale_i * qi . ki at slot j of `page`.
float kl_logit(uint page, uint j) {
  uint ko = pc.off_ki + (page * pc.Bs + j) * pc.Di;
  float dot = 0.0;
  for (uint d0 = 0u; d0 < pc.Di; d0 += 64u)
    [[unroll]] for (uint u = 0u; u < 64u; ++u)
      if (d0 + u < pc.Di) dot += sh_qi[d0 + u] * LD(KI_TYPE, ki_d, ko + d0 + u);
  return pc.scale_i * dot;
}

// Loads qi[t][g] into sh_qi (uniform control flow: barriers before and after).
void kl_load_qi(uint t, uint g) {
  barrier();
  [[unroll]] for (uint x = 0u; x < MAX_DI / WGS; ++x) {
    uint d = gl_LocalInvocationID.x + x * WGS;
    if (d < pc.Di) sh_qi[d] = LD(QI_TYPE, qi_d, pc.off_qi + (t * pc.Hs + g) * pc.Di + d);
  }
  barrier();
}
