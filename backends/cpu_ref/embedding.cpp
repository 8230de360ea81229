// y[t] = table[ids[t]]. Every id is checked before any row is written.
#include <cstring>
#include <string>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/tensor_access.h"
#include "hal/error.h"

namespace msa::cpu_ref {

void embedding(hal::Stream&, const ops::EmbeddingArgs& a) {
  const int64_t V = a.table.dim(0), H = a.table.dim(1), T = a.ids.numel();
  const int32_t* ids = a.ids.data<int32_t>();
  for (int64_t t = 0; t < T; ++t)
    MSA_CHECK_ARG(ids[t] >= 0 && ids[t] < V, "embedding", "ids",
                  "ids[" + std::to_string(t) + "] = " + std::to_string(ids[t]) + " is outside the table's " +
                      std::to_string(V) + " rows");
  const bool same = a.table.dtype == a.y.dtype;
  const size_t row_bytes = static_cast<size_t>(H) * hal::dtype_size(a.y.dtype);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t src = static_cast<int64_t>(ids[t]) * H;
    if (same) {
      std::memcpy(a.y.data<char>() + t * row_bytes, a.table.data<char>() + src * hal::dtype_size(a.table.dtype),
                  row_bytes);
    } else {
      for (int64_t h = 0; h < H; ++h) st(a.y, t * H + h, ld(a.table, src + h));
    }
  }
}

}  // namespace msa::cpu_ref
