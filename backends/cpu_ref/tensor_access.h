// Scalar element access for the cpu-ref supporting ops: read any activation dtype as
// float, write a double rounded to the tensor's dtype, and the row/column split of a
// row-major tensor over its last dim.
#pragma once
#include <cstdint>

#include "hal/dtype.h"
#include "hal/tensor.h"

namespace msa::cpu_ref {

// Element i of t (any dtype, i32 converted) as float.
inline float ld(const hal::Tensor& t, int64_t i) {
  return hal::load_as_f32(t.dtype, t.data<char>(), static_cast<size_t>(i));
}

// Stores v into element i of t, rounded (to nearest even) to t's dtype.
inline void st(const hal::Tensor& t, int64_t i, double v) {
  hal::store_from_f32(t.dtype, t.data<char>(), static_cast<size_t>(i), static_cast<float>(v));
}

// Size of the last dim (1 for rank 0).
inline int64_t last_dim(const hal::Tensor& t) { return t.rank == 0 ? 1 : t.dim(-1); }

// Product of every dim but the last (so a [T][H][D] tensor is T*H rows of D); computed
// from the shape, not numel / last_dim, so a zero-size last dim is fine.
inline int64_t leading_rows(const hal::Tensor& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.rank; ++i) r *= t.shape[i];
  return r;
}

}  // namespace msa::cpu_ref
