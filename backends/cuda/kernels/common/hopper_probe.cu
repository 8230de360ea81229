// hopper_code_present(): the probe kernel below declares shared memory only where the
// sm_90a code path is compiled (MSA_HOPPER_PTX), so the attributes of the binary the
// runtime picked for a device tell whether the Hopper kernels have real bodies there.
// (cudaFuncAttributes::binaryVersion cannot: it reads 90 for sm_90, sm_90a and PTX
// JIT-compiled on a 9.0 device alike.)
#include "backends/cuda/kernels/common/hopper_probe.h"

#include <atomic>

#include "backends/cuda/kernels/common/hopper_ptx.cuh"

namespace msa::cuda {
namespace {

__global__ void hopper_probe_kernel(int* out) {
#if MSA_HOPPER_PTX
  __shared__ int marker[32];
  marker[threadIdx.x % 32] = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (out != nullptr) out[threadIdx.x] = marker[(threadIdx.x + 1) % 32];
#else
  if (out != nullptr) out[threadIdx.x] = 0;
#endif
}

constexpr int kMaxDevices = 64;
std::atomic<int> g_present[kMaxDevices];  // 0 unknown, 1 yes, 2 no

}  // namespace

bool hopper_code_present(int device) {
  if (device < 0 || device >= kMaxDevices) return false;
  int known = g_present[device].load();
  if (known == 0) {
    int cur = -1;
    cudaFuncAttributes attr{};
    const bool ok = cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(device) == cudaSuccess &&
                    cudaFuncGetAttributes(&attr, hopper_probe_kernel) == cudaSuccess && attr.sharedSizeBytes > 0;
    if (cur >= 0) cudaSetDevice(cur);
    (void)cudaGetLastError();  // a failed query is "no", not a sticky error for the caller
    known = ok ? 1 : 2;
    g_present[device].store(known);
  }
  return known == 1;
}

}  // namespace msa::cuda
