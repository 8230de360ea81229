// y = silu(gate) * up = gate / (1 + exp(-gate)) * up, elementwise in f64.
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void swiglu(hal::Stream&, const ops::SwigluArgs& a) {
  const int64_t n = a.y.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double g = ld(a.gate, i);
    st(a.y, i, g / (1.0 + std::exp(-g)) * ld(a.up, i));
  }
}

}  // namespace msa::cpu_ref
