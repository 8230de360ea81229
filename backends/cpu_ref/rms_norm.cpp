// RMSNorm over the last dim: y = x * rsqrt(mean(x^2) + eps) * w (plain) or * (1 + w)
// (gemma, M3). Statistics and products in f64, one rounding to y's dtype.
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void rms_norm(hal::Stream&, const ops::RmsNormArgs& a) {
  const int64_t N = last_dim(a.x), M = leading_rows(a.x);
  const bool gemma = a.kind == ops::NormKind::gemma;
  for (int64_t m = 0; m < M; ++m) {
    const int64_t base = m * N;
    double ss = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      const double v = ld(a.x, base + n);
      ss += v * v;
    }
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(N) + static_cast<double>(a.eps));
    for (int64_t n = 0; n < N; ++n) {
      const double w = ld(a.w, n);
      st(a.y, base + n, ld(a.x, base + n) * inv * (gemma ? 1.0 + w : w));
    }
  }
}

}  // namespace msa::cpu_ref
