#include "backends/cpu_ref/attention_backward.h"

#include <cmath>

#include "backends/cpu_ref/common.h"

namespace msa::cpu_ref {

void AttentionGrads::store(const hal::Tensor& dq_out, const hal::Tensor& dk_out, const hal::Tensor& dv_out) const {
  float* q = dq_out.data<float>();
  for (size_t i = 0; i < dq.size(); ++i) q[i] = static_cast<float>(dq[i]);
  float* k = dk_out.data<float>();
  float* v = dv_out.data<float>();
  for (size_t i = 0; i < dk.size(); ++i) {
    k[i] = static_cast<float>(dk[i]);
    v[i] = static_cast<float>(dv[i]);
  }
}

void backward_heads(const BackwardRows& rows, int64_t t, int64_t h0, int64_t nh, const KvRows& kv, int64_t limit,
                    double scale, AttentionGrads& grads, std::vector<double>& scratch) {
  const int64_t H = rows.q.dim(1), D = kv.D, n = kv.rows();
  scratch.resize(static_cast<size_t>(3 * D));
  double* q = scratch.data();
  double* dout = q + D;
  double* out = dout + D;
  for (int64_t h = h0; h < h0 + nh; ++h) {
    const int64_t row = t * H + h;
    const double lse = static_cast<double>(rows.lse.data<const float>()[row]);
    if (lse == kNegInf) continue;  // an empty set: no gradient
    load_row(rows.q, row * D, D, q);
    load_row(rows.dout, row * D, D, dout);
    load_row(rows.out, row * D, D, out);
    const double delta = dot(dout, out, D);
    double* dq = grads.dq.data() + row * D;
    for (int64_t r = 0; r < n; ++r) {
      if (kv.pos[static_cast<size_t>(r)] > limit) continue;
      const float* k = kv.k.data() + r * D;
      const float* v = kv.v.data() + r * D;
      const double p = std::exp(scale * dot(q, k, D) - lse);
      const double ds = p * (dot(dout, v, D) - delta);
      double* dk = grads.dk.data() + kv.k_off[static_cast<size_t>(r)];
      double* dv = grads.dv.data() + kv.v_off[static_cast<size_t>(r)];
      for (int64_t d = 0; d < D; ++d) {
        dv[d] += p * dout[d];
        dq[d] += scale * ds * static_cast<double>(k[d]);
        dk[d] += scale * ds * q[d];
      }
    }
  }
}

}  // namespace msa::cpu_ref
