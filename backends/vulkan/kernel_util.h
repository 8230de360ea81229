// Small helpers shared by the kernel files: shader variant names per dtype, 32-bit
// narrowing with a clear error, and the first-argument device lookup.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/vulkan/device.h"
#include "hal/dtype.h"
#include "hal/error.h"

namespace msa::vulkan {

// "f32", "bf16", "f16", "fp8", "fp4" (the variant suffixes of the shaders).
inline std::string tag(hal::DType t) {
  switch (t) {
    case hal::DType::f32:
      return "f32";
    case hal::DType::bf16:
      return "bf16";
    case hal::DType::f16:
      return "f16";
    case hal::DType::fp8_e4m3:
      return "fp8";
    case hal::DType::i32:
      return "i32";
    case hal::DType::fp4_e2m1x2:
      return "fp4";
  }
  return "?";
}

// v as uint32_t; throws msa::Error naming op/arg when it does not fit.
inline uint32_t u32(int64_t v, const char* op, const char* arg) {
  MSA_CHECK_ARG(v >= 0 && v <= int64_t{0xffffffff}, op, arg,
                "size " + std::to_string(v) + " does not fit the Vulkan kernels' 32-bit indexing");
  return static_cast<uint32_t>(v);
}

// The product of every dim but the last.
inline int64_t rows_of(const hal::Tensor& t) {
  int64_t r = 1;
  for (int i = 0; i + 1 < t.rank; ++i) r *= t.shape[i];
  return r;
}

inline int64_t last_dim_of(const hal::Tensor& t) { return t.rank == 0 ? 1 : t.dim(-1); }

}  // namespace msa::vulkan
