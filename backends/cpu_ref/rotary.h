// Neox-style rotary rotation of one head row, shared by rope and rope_3d.
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/cpu_ref/tensor_access.h"

namespace msa::cpu_ref {

// Row [base, base + D) of x into the same row of y: for j < half, the pair
// (j, j + half) is rotated by angle[j] (rotate_half: y_j = x_j cos - x_{j+half} sin,
// y_{j+half} = x_{j+half} cos + x_j sin); dims from 2*half on are copied. Both values
// of a pair are read before either is written, so y may be the same memory as x.
inline void rotate_half_row(const hal::Tensor& x, const hal::Tensor& y, int64_t base, int64_t D, int64_t half,
                            const double* angle) {
  for (int64_t j = 0; j < half; ++j) {
    const double x0 = ld(x, base + j), x1 = ld(x, base + j + half);
    const double c = std::cos(angle[j]), s = std::sin(angle[j]);
    st(y, base + j, x0 * c - x1 * s);
    st(y, base + j + half, x1 * c + x0 * s);
  }
  for (int64_t d = 2 * half; d < D; ++d) st(y, base + d, ld(x, base + d));
}

}  // namespace msa::cpu_ref
