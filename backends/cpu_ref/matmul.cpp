// y = x W^T (+ bias): one f64 dot product per output element, rounded once.
#include <vector>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

void matmul(hal::Stream&, const ops::MatmulArgs& a) {
  const int64_t N = a.w.dim(0), K = a.w.dim(1);
  const int64_t M = leading_rows(a.x);  // x may carry extra leading dims ([T][K] or [B][T][K])
  // W is read M times: convert it once.
  std::vector<double> w(static_cast<size_t>(N * K));
  for (int64_t i = 0; i < N * K; ++i) w[i] = ld(a.w, i);
  std::vector<double> xr(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) xr[k] = ld(a.x, m * K + k);
    for (int64_t n = 0; n < N; ++n) {
      double acc = a.bias.present() ? ld(a.bias, n) : 0.0;
      const double* wr = w.data() + n * K;
      for (int64_t k = 0; k < K; ++k) acc += xr[k] * wr[k];
      st(a.y, m * N + n, acc);
    }
  }
}

}  // namespace msa::cpu_ref
