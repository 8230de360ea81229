// embedding: y[t] = table[ids[t]]. An id outside [0, V) raises the device error flag and
// its row is written as zeros.
#include "backends/cuda/error_flags.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {
namespace {

template <typename U>
__global__ void embedding_kernel(const U* __restrict__ table, const int32_t* __restrict__ ids, U* __restrict__ y,
                                 int64_t V, int64_t units, int* flag) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool ok = id >= 0 && id < V;
  if (!ok && threadIdx.x == 0) raise_flag(flag, kErrTokenId, static_cast<int>(hal::OpId::embedding));
  for (int64_t i = threadIdx.x; i < units; i += blockDim.x) y[t * units + i] = ok ? table[id * units + i] : U{};
}

}  // namespace

void embedding(hal::Stream& s, const ops::EmbeddingArgs& a) {
  const int64_t T = a.ids.dim(0), V = a.table.dim(0);
  const size_t row_bytes = static_cast<size_t>(a.table.dim(1)) * hal::dtype_size(a.table.dtype);
  if (T == 0 || row_bytes == 0) return;
  auto& st = gpu_stream(s);
  const bool aligned16 = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(a.table.data<char>()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(a.y.data<char>()) % 16 == 0;
  if (aligned16) {
    embedding_kernel<uint4><<<static_cast<unsigned>(T), 128, 0, st.native()>>>(
        a.table.data<uint4>(), a.ids.data<int32_t>(), a.y.data<uint4>(), V, static_cast<int64_t>(row_bytes / 16),
        st.error_flag());
  } else {
    embedding_kernel<uint16_t><<<static_cast<unsigned>(T), 128, 0, st.native()>>>(
        a.table.data<uint16_t>(), a.ids.data<int32_t>(), a.y.data<uint16_t>(), V, static_cast<int64_t>(row_bytes / 2),
        st.error_flag());
  }
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
