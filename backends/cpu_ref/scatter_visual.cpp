// In place: the rows of x whose token is the placeholder take the rows of vis, in order.
// The placeholder count is checked against Nv before anything is written.
#include <string>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"
#include "hal/error.h"

namespace msa::cpu_ref {

void scatter_visual(hal::Stream&, const ops::ScatterVisualArgs& a) {
  const int64_t T = a.tokens.numel(), Nv = a.vis.dim(0), H = last_dim(a.x);
  const int32_t* tokens = a.tokens.data<int32_t>();
  int64_t count = 0;
  for (int64_t t = 0; t < T; ++t) count += tokens[t] == a.placeholder ? 1 : 0;
  MSA_CHECK_ARG(count == Nv, "scatter_visual", "vis",
                "tokens hold " + std::to_string(count) + " placeholders (id " + std::to_string(a.placeholder) +
                    ") but vis has " + std::to_string(Nv) + " rows");
  int64_t r = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] != a.placeholder) continue;
    for (int64_t h = 0; h < H; ++h) st(a.x, t * H + h, ld(a.vis, r * H + h));
    ++r;
  }
}

}  // namespace msa::cpu_ref
