// Helper of the f32 training kernels: a whole tensor converted to f32 on the arena.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/parallel.h"
#include "hal/dtype.h"
#include "hal/tensor.h"

namespace msa::cpu {

// t's elements as f32, converted `row` elements per task.
inline std::vector<float> to_f32(const hal::Tensor& t, int64_t row) {
  const int64_t n = t.present() ? t.numel() : 0;
  std::vector<float> v(static_cast<size_t>(n));
  if (n == 0) return v;
  const uint8_t* src = t.data<const uint8_t>();
  parallel_for((n + row - 1) / row, [&](int64_t r) {
    for (int64_t i = r * row; i < std::min(n, (r + 1) * row); ++i)
      v[static_cast<size_t>(i)] = hal::load_as_f32(t.dtype, src, static_cast<size_t>(i));
  }, 16);
  return v;
}

}  // namespace msa::cpu
