// y = gelu(x) = x/2 * (1 + erf(x / sqrt(2))), the exact (erf) form, elementwise in f64.
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void gelu(hal::Stream&, const ops::GeluArgs& a) {
  const int64_t n = a.y.numel();
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
  for (int64_t i = 0; i < n; ++i) {
    const double x = ld(a.x, i);
    st(a.y, i, 0.5 * x * (1.0 + std::erf(x * inv_sqrt2)));
  }
}

}  // namespace msa::cpu_ref
