// 3-axis rotary embedding of the ViT: a = 2*floor(D/6) dims per axis, frequencies
// [t (a/2) | h (a/2) | w (a/2)] with inv_freq_j = theta^(-2j/a) per axis, rotated
// neox-style over the first 3a dims (pair i with i + 3a/2); dims past 3a pass through.
#include <cmath>
#include <vector>

#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/rotary.h"

namespace msa::cpu_ref {

void rope_3d(hal::Stream&, const ops::Rope3dArgs& a) {
  const int64_t N = a.x.dim(0), H = a.x.dim(1), D = a.x.dim(2);
  const int64_t per_axis = 2 * (D / 6);  // a
  const int64_t npair = per_axis / 2;    // frequencies per axis
  std::vector<double> inv_freq(static_cast<size_t>(npair)), angle(static_cast<size_t>(3 * npair));
  for (int64_t j = 0; j < npair; ++j)
    inv_freq[j] = std::pow(static_cast<double>(a.theta), -2.0 * static_cast<double>(j) / per_axis);
  const int32_t* pos = a.pos.data<int32_t>();
  for (int64_t n = 0; n < N; ++n) {
    for (int axis = 0; axis < 3; ++axis)
      for (int64_t j = 0; j < npair; ++j)
        angle[axis * npair + j] = static_cast<double>(pos[n * 3 + axis]) * inv_freq[j];
    for (int64_t h = 0; h < H; ++h) rotate_half_row(a.x, a.y, (n * H + h) * D, D, 3 * npair, angle.data());
  }
}

}  // namespace msa::cpu_ref
