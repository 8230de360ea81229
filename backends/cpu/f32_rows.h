// Helper of the f32 training kernels: a whole tensor converted to f32 on the arena.
#pragma once
#include <cstdint>
#include <vector>

#include "hal/tensor.h"

namespace msa::cpu {

// t's elements as f32 (empty for an absent tensor), converted `row` elements per task
// (Highway conversions for f32, bf16, f16; hal::load_as_f32 for the other dtypes).
std::vector<float> to_f32(const hal::Tensor& t, int64_t row);

}  // namespace msa::cpu
