// Device side of the open-time wavefront self-check (wave_check.h).
#include "backends/hip/wave_check.h"

#include "backends/cuda/check.h"
#include "backends/cuda/common.cuh"

namespace msa::hip {
namespace {

__global__ void wave_check_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int sum = warp_sum_int(lane);
  const msa_lane_mask_t all = __ballot_sync(MSA_FULL_MASK, 1);
  if (threadIdx.x == 0) {
    out[0] = warpSize;
    out[1] = kWarp;
    out[2] = sum;
    out[3] = __popcll(static_cast<unsigned long long>(all));
  }
}

}  // namespace

WaveReport run_wave_check(hipStream_t stream) {
  int* d = nullptr;
  int h[4] = {};
  MSA_CUDA_CHECK(hipMalloc(reinterpret_cast<void**>(&d), sizeof(h)));
  wave_check_kernel<<<1, 2 * kWarp, 0, stream>>>(d);
  hipError_t err = hipGetLastError();
  if (err == hipSuccess) err = hipMemcpyAsync(h, d, sizeof(h), hipMemcpyDeviceToHost, stream);
  if (err == hipSuccess) err = hipStreamSynchronize(stream);
  (void)hipFree(d);
  if (err != hipSuccess) throw_gpu_error(err, "the wavefront self-check kernel", __FILE__, __LINE__);
  return {h[0], h[1], h[2], h[3]};
}

}  // namespace msa::hip
