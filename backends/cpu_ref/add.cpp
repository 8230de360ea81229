// y = a + b, elementwise, summed in f64 and rounded once.
#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void add(hal::Stream&, const ops::AddArgs& a) {
  const int64_t n = a.y.numel();
  for (int64_t i = 0; i < n; ++i) st(a.y, i, static_cast<double>(ld(a.a, i)) + ld(a.b, i));
}

}  // namespace msa::cpu_ref
