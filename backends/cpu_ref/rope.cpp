// Rotary embedding (neox, partial): the first rotary_dim dims of every head rotate with
// inv_freq_j = theta^(-2j/rotary_dim) at position pos[t]; the rest pass through.
#include <cmath>
#include <vector>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/rotary.h"

namespace msa::cpu_ref {

void rope(hal::Stream&, const ops::RopeArgs& a) {
  const int64_t T = a.x.dim(0), H = a.x.dim(1), D = a.x.dim(2);
  const int64_t rd = a.rotary_dim == 0 ? D : a.rotary_dim;
  const int64_t half = rd / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half)), angle(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j)
    inv_freq[j] = std::pow(static_cast<double>(a.theta), -2.0 * static_cast<double>(j) / rd);
  const int32_t* pos = a.pos.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < half; ++j) angle[j] = static_cast<double>(pos[t]) * inv_freq[j];
    for (int64_t h = 0; h < H; ++h) rotate_half_row(a.x, a.y, (t * H + h) * D, D, half, angle.data());
  }
}

}  // namespace msa::cpu_ref
