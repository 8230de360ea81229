// Every CUDA runtime call goes through MSA_CUDA_CHECK: a failure becomes msa::Error with
// the call, the CUDA error name/message and where it happened. Kernel launches are
// followed by MSA_CUDA_CHECK_LAUNCH() (launch-configuration errors surface at once).
#pragma once
#include <string>

#include "backends/cuda/vendor.h"
#include "hal/error.h"

namespace msa::MSA_GPU_NS {

// Throws msa::Error("<vendor>: <what> failed: <message> (<code>)").
[[noreturn]] void throw_gpu_error(cudaError_t err, const char* what, const char* file, int line);

}  // namespace msa::MSA_GPU_NS

#define MSA_CUDA_CHECK(call)                                                                              \
  do {                                                                                                    \
    cudaError_t msa_err_ = (call);                                                                        \
    if (msa_err_ != cudaSuccess) ::msa::MSA_GPU_NS::throw_gpu_error(msa_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define MSA_CUDA_CHECK_LAUNCH() MSA_CUDA_CHECK(cudaGetLastError())
