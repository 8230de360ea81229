// hal::Tensor: a non-owning, contiguous, row-major view (buffer + byte offset + dtype +
// shape of up to 4 dims). A default-constructed Tensor is "absent" (optional arguments).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "hal/buffer.h"
#include "hal/dtype.h"
#include "hal/export.h"

namespace msa::hal {

inline constexpr int kMaxRank = 4;

struct MSA_API Tensor {
  Buffer* buffer = nullptr;  // null = absent
  size_t offset = 0;         // bytes from the buffer's start
  DType dtype = DType::f32;
  int rank = 0;
  std::array<int64_t, kMaxRank> shape{};  // unused trailing dims are 0

  Tensor() = default;
  Tensor(Buffer* b, DType t, std::initializer_list<int64_t> dims, size_t byte_offset = 0);

  // True when the tensor is given (optional arguments may be absent).
  bool present() const { return buffer != nullptr; }
  // Number of elements (1 for rank 0).
  int64_t numel() const;
  // Bytes spanned.
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  // Size of dim i (negative counts from the end).
  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  // Same bytes, new shape (element count must match; throws msa::Error otherwise).
  Tensor reshape(std::initializer_list<int64_t> dims) const;
  // Rows [begin, end) of dim 0, as a view.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // "bf16[4, 128, 64]"
  std::string str() const;

  // Address of the first element for backends whose handles are addresses (CPU, CUDA,
  // HIP). Vulkan must use buffer->handle() and offset instead.
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(static_cast<char*>(buffer->handle()) + offset);
  }
};

// Stream::copy's argument check, shared by every backend: throws msa::Error (prefixed by
// `who`) when dst and src differ in size or share some of their bytes without being the
// same range; returns false when there is nothing to copy (no bytes, or dst is src). Device
// copies (cudaMemcpyAsync, vkCmdCopyBuffer, a copy shader) are undefined on overlap.
MSA_API bool check_copy(const std::string& who, const Tensor& dst, const Tensor& src);

}  // namespace msa::hal
