// Host side of the TMA tile loads of the Hopper-tier indexer_score kernel
// (prefill_wgmma.cu): the driver's cuTensorMapEncodeTiled, found through the runtime's
// entry-point query (no link against libcuda), and the one map shape it uses: a
// [rows][cols] matrix of 16-bit elements read in boxes of 64 columns (128 bytes) x
// box_rows rows, stored with the 128-byte swizzle (16-byte chunk c of row r at chunk
// c ^ r % 8; the layout of common/hopper_ptx.cuh).
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace msa::cuda {

using TensorMapEncoder = PFN_cuTensorMapEncodeTiled_v12000;

// The encoder, or null when the driver does not offer it (the caller runs another kernel).
inline TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return TensorMapEncoder{nullptr};
    }
    return reinterpret_cast<TensorMapEncoder>(f);
  }();
  return fn;
}

// False when it cannot be encoded (no encoder, base not 16-byte aligned, too many rows):
// the caller then runs another kernel. Reads outside the matrix fill zeros.
inline bool make_map_sw128(CUtensorMap* m, const void* base, int64_t rows, int cols, int box_rows,
                           CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) {
  const TensorMapEncoder enc = tensor_map_encoder();
  if (enc == nullptr || rows <= 0 || rows > INT32_MAX) return false;  // row coordinates are int32
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  return enc(m, dtype, 2, const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace msa::cuda
