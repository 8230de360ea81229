// idx[m] = the first index of the largest value of row m. NaN is never the maximum;
// an all-NaN (or empty) row gives 0. -0 and +0 compare equal, so the lower index wins.
#include <cmath>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void argmax(hal::Stream&, const ops::ArgmaxArgs& a) {
  const int64_t N = last_dim(a.x), M = leading_rows(a.x);
  int32_t* idx = a.idx.data<int32_t>();
  for (int64_t m = 0; m < M; ++m) {
    int64_t best = -1;
    float best_v = 0.0f;
    for (int64_t n = 0; n < N; ++n) {
      const float v = ld(a.x, m * N + n);
      if (std::isnan(v)) continue;
      if (best < 0 || v > best_v) {
        best = n;
        best_v = v;
      }
    }
    idx[m] = static_cast<int32_t>(best < 0 ? 0 : best);
  }
}

}  // namespace msa::cpu_ref
