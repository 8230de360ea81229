// LayerNorm over the last dim: y = (x - mean) * rsqrt(var + eps) * w + b, with the
// biased (1/N) variance as in PyTorch. Two passes in f64, one rounding to y's dtype.
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void layer_norm(hal::Stream&, const ops::LayerNormArgs& a) {
  const int64_t N = last_dim(a.x), M = leading_rows(a.x);
  for (int64_t m = 0; m < M; ++m) {
    const int64_t base = m * N;
    double sum = 0.0;
    for (int64_t n = 0; n < N; ++n) sum += ld(a.x, base + n);
    const double mean = sum / static_cast<double>(N);
    double var = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const double d = ld(a.x, base + n) - mean;
      var += d * d;
    }
    var /= static_cast<double>(N);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(a.eps));
    for (int64_t n = 0; n < N; ++n) {
      double v = (ld(a.x, base + n) - mean) * inv * ld(a.w, n);
      if (a.b.present()) v += ld(a.b, n);
      st(a.y, base + n, v);
    }
  }
}

}  // namespace msa::cpu_ref
