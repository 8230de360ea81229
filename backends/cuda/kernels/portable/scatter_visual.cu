// scatter_visual: rows t of x whose token is the placeholder are replaced, in order, by
// the rows of vis. Pass 1 (one block) numbers the placeholders with a block scan and
// checks the count against Nv (mismatch: flag raised, x left untouched); pass 2 copies.
#include "backends/cuda/error_flags.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {
namespace {

constexpr int kScanThreads = 1024;

// ord[t] = ordinal of placeholder t or -1; ord[T] = 1 when the count matches Nv.
__global__ void number_placeholders(const int32_t* __restrict__ tokens, int64_t T, int32_t placeholder, int64_t Nv,
                                    int32_t* __restrict__ ord, int* flag) {
  __shared__ int scratch[kScanThreads / kWarp + 1];
  int64_t base = 0;
  for (int64_t start = 0; start < T; start += kScanThreads) {
    const int64_t t = start + threadIdx.x;
    const int is = (t < T && tokens[t] == placeholder) ? 1 : 0;
    int total = 0;
    const int before = block_excl_scan(is, scratch, &total);
    if (t < T) ord[t] = is ? static_cast<int32_t>(base + before) : -1;
    base += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const bool ok = base == Nv;
    ord[T] = ok ? 1 : 0;
    if (!ok) raise_flag(flag, kErrPlaceholders, static_cast<int>(hal::OpId::scatter_visual));
  }
}

template <typename U>
__global__ void copy_rows(const U* __restrict__ vis, const int32_t* __restrict__ ord, U* __restrict__ x, int64_t T,
                          int64_t units) {
  if (ord[T] == 0) return;
  const int64_t n = T * units;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / units;
    const int o = ord[t];
    if (o >= 0) x[i] = vis[o * units + i % units];
  }
}

}  // namespace

void scatter_visual(hal::Stream& s, const ops::ScatterVisualArgs& a) {
  const int64_t T = a.tokens.dim(0), Nv = a.vis.dim(0);
  const size_t row_bytes = static_cast<size_t>(a.x.dim(1)) * hal::dtype_size(a.x.dtype);
  if (T == 0) {
    return;  // Nv must then be 0: checked on the host where possible
  }
  auto& st = gpu_stream(s);
  auto* ord = static_cast<int32_t*>(st.workspace(static_cast<size_t>(T + 1) * sizeof(int32_t)));
  number_placeholders<<<1, kScanThreads, 0, st.native()>>>(a.tokens.data<int32_t>(), T, a.placeholder, Nv, ord,
                                                           st.error_flag());
  MSA_CUDA_CHECK_LAUNCH();
  if (row_bytes == 0) return;
  const int64_t units = static_cast<int64_t>(row_bytes / 2);
  copy_rows<uint16_t><<<grid_for(T * units, 256, st.props()), 256, 0, st.native()>>>(
      a.vis.present() ? a.vis.data<uint16_t>() : nullptr, ord, a.x.data<uint16_t>(), T, units);
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
