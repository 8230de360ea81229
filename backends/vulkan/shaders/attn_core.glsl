// Online-softmax attention of one query row (one workgroup) over tiles of up to WGS
// keys: each invocation scores one key of the tile, the workgroup reduces max and sum,
// then each invocation accumulates its own output dims over the tile's probabilities.
// The includer defines A_TYPE, q_d (its q buffer), K_AT(i) / V_AT(i) (K / V element i
// as float, offsets applied). D <= MAX_D. Non-finite inputs (docs/spec.md): a visible
// logit that is NaN or infinite, or a non-finite accumulated value, makes the row's out
// and lse NaN; call attn_finish() (uniform control flow) before attn_out / attn_lse.
#define MAX_D 256
#define DPT (MAX_D / WGS)

shared float sh_q[MAX_D];
shared float sh_p[WGS];
shared uint sh_row[WGS];

float attn_m;           // running max of the scaled logits (uniform)
bool attn_bad;          // a visible logit or an accumulated value is not finite (uniform)
float attn_l;           // running softmax denominator at attn_m (uniform)
float attn_acc[DPT];    // this invocation's output dims tid, tid + WGS, ...
uint attn_D;
float attn_scale;

// Loads q (D elements from element `q_off` of q_d) and resets the state.
void attn_begin(uint q_off, uint D, float scale) {
  uint tid = gl_LocalInvocationID.x;
  for (uint d = tid; d < D; d += WGS) sh_q[d] = LD(A_TYPE, q_d, q_off + d);
  barrier();
  attn_m = NEG_INF;
  attn_bad = false;
  attn_l = 0.0;
  [[unroll]] for (uint j = 0; j < DPT; ++j) attn_acc[j] = 0.0;
  attn_D = D;
  attn_scale = scale;
}

// One tile: this invocation's key row starts at element `row` of K and V and takes part
// when `valid`; `n` (uniform) bounds the invocations that may be valid.
void attn_tile(bool valid, uint row, uint n) {
  if (attn_bad) return;  // uniform: the row is NaN whatever follows
  uint tid = gl_LocalInvocationID.x;
  float s = NEG_INF;
  if (valid) {
    float dot = 0.0;
    for (uint d = 0; d < attn_D; ++d) dot += sh_q[d] * K_AT(row + d);
    s = dot * attn_scale;
    if (isnan(s) || isinf(s)) s = POS_INF;  // non-finite: reduces to +inf below
  }
  float tmax = wg_max(s);
  if (tmax == NEG_INF) return;  // uniform: no valid key in this tile
  if (tmax == POS_INF) {        // uniform: a visible logit is not finite
    attn_bad = true;
    return;
  }
  float m_new = max(attn_m, tmax);
  float p = valid ? exp(s - m_new) : 0.0;
  float alpha = exp(attn_m - m_new);  // 0 on the first tile (attn_m = -inf)
  attn_l = attn_l * alpha + wg_sum(p);
  sh_p[tid] = p;
  sh_row[tid] = valid ? row : INVALID;
  barrier();
  [[unroll]] for (uint j = 0; j < DPT; ++j) {
    uint d = tid + j * WGS;
    if (d < attn_D) {
      float a = attn_acc[j] * alpha;
      for (uint i = 0; i < n; ++i) {
        uint r = sh_row[i];
        if (r != INVALID) a += sh_p[i] * V_AT(r + d);
      }
      attn_acc[j] = a;
    }
  }
  barrier();
  attn_m = m_new;
}

// Adds the accumulated values to the non-finite check (uniform control flow: barriers).
void attn_finish() {
  float bad = 0.0;
  [[unroll]] for (uint j = 0; j < DPT; ++j) {
    uint d = gl_LocalInvocationID.x + j * WGS;
    if (d < attn_D && (isnan(attn_acc[j]) || isinf(attn_acc[j]))) bad = 1.0;
  }
  attn_bad = attn_bad || wg_max(bad) > 0.0;
}

// The natural-log softmax denominator (scale included); -inf when nothing was attended,
// NaN for a non-finite row.
float attn_lse() { return attn_bad ? QNAN : attn_l > 0.0 ? attn_m + log(attn_l) : NEG_INF; }

// Output dim j of this invocation (0 when nothing was attended, NaN for a non-finite row).
float attn_out(uint j) { return attn_bad ? QNAN : attn_l > 0.0 ? attn_acc[j] / attn_l : 0.0; }
