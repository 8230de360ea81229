// A borrowed view of one Python tensor argument (anything with the DLPack protocol: torch
// tensors, NumPy arrays) as msa sees it: address, msa dtype, shape, memory kind. The
// DLPack capsule is kept for the view's lifetime, so the producer's memory stays valid.
#pragma once
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <string>

#include "hal/dtype.h"
#include "hal/tensor.h"

namespace msa::python {

namespace py = pybind11;

// Where a tensor's memory lives, as far as msa's backends are concerned.
enum class Memory { host, cuda };

// How an argument may be typed beyond msa's own dtypes.
enum class ByteRole {
  none,         // uint8 is refused
  nvfp4_codes,  // uint8 means fp4_e2m1x2 (NVFP4 key codes, two per byte)
  fp8_bytes,    // uint8 means fp8_e4m3 bytes (NVFP4 group scales)
};

struct TensorView {
  py::object capsule;  // keeps the producer's memory alive
  void* data = nullptr;
  hal::DType dtype = hal::DType::f32;
  int rank = 0;
  std::array<int64_t, hal::kMaxRank> shape{};
  Memory memory = Memory::host;
  int device_id = 0;         // CUDA ordinal when memory == cuda
  bool int64_index = false;  // an int64 tensor given for an int32 argument (host only)

  int64_t numel() const;
  size_t nbytes() const;
  // "cpu" or "cuda:N", for messages.
  std::string where() const;
};

// Reads `obj` through DLPack. Throws msa::ArgError naming `arg` when it is not a tensor,
// is not contiguous, has more than 4 dims, or has a dtype msa does not take.
TensorView view_of(py::handle obj, const std::string& where, const std::string& arg, ByteRole bytes);

}  // namespace msa::python
