// Element types msa speaks, their sizes and names, and scalar host conversions.
// bf16 and f16 round to nearest even; fp8_e4m3 is OCP E4M3FN (no infinities, max 448,
// saturating on conversion from larger values, NaN kept). fp4_e2m1x2 is a byte holding
// two OCP E2M1 values (low nibble = even element): the storage of NVFP4 indexer keys
// (hal/nvfp4.h). Its elements are the bytes, so load_as_f32 / store_from_f32 move the raw
// byte value (0..255) and compares of such tensors are bit-exact; decoding needs the
// group scales.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hal/export.h"

namespace msa::hal {

enum class DType : uint8_t { f32, f16, bf16, fp8_e4m3, i32, fp4_e2m1x2 };

inline constexpr int kDTypeCount = 6;

// Bytes per element.
MSA_API size_t dtype_size(DType t);
// Canonical lower-case name: "f32", "f16", "bf16", "fp8_e4m3", "i32", "fp4_e2m1x2".
MSA_API const char* dtype_name(DType t);
// Parses a canonical name (case-insensitive; also "float32", "bfloat16", "float16",
// "int32", "e4m3", "nvfp4"); throws msa::Error naming `arg` otherwise.
MSA_API DType parse_dtype(std::string_view name, const std::string& arg = "dtype");
// True for the floating-point activation types f32, f16, bf16.
MSA_API bool is_activation_dtype(DType t);

// Scalar conversions (round to nearest even).
MSA_API uint16_t f32_to_bf16(float x);
MSA_API float bf16_to_f32(uint16_t x);
MSA_API uint16_t f32_to_f16(float x);
MSA_API float f16_to_f32(uint16_t x);
MSA_API uint8_t f32_to_fp8_e4m3(float x);
MSA_API float fp8_e4m3_to_f32(uint8_t x);

// Rounds x to the precision of t (identity for f32 and i32).
MSA_API float round_to(DType t, float x);

// Reads element i of a host array of type t as float / writes float into it.
MSA_API float load_as_f32(DType t, const void* base, size_t i);
MSA_API void store_from_f32(DType t, void* base, size_t i, float x);

}  // namespace msa::hal
