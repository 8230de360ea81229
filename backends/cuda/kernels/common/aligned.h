// Whether a tensor's first element sits on a multiple of `bytes` (the choosers' alignment
// checks: vector loads, cp.async and TMA need 16-byte rows or more).
#pragma once
#include <cstdint>

#include "hal/tensor.h"

namespace msa::cuda {

inline bool aligned_to(const hal::Tensor& t, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(t.data<char>()) % bytes == 0;
}

}  // namespace msa::cuda
