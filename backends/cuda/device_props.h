// What kernels and their choosers need to know about a GPU, read once when the device
// opens. Plain data without the vendor runtime: the host-only choosers read it.
#pragma once
#include <cstddef>
#include <string>

#include "backends/cuda/gpu_ns.h"

namespace msa::MSA_GPU_NS {

struct DeviceProps {
  int index = 0;     // CUDA device ordinal
  std::string name;  // "NVIDIA H200"
  int sm_count = 1;  // multiprocessors
  int cc_major = 0, cc_minor = 0;
  size_t smem_optin = 48 * 1024;  // max dynamic shared memory per block after opt-in
  size_t l2_bytes = 0;
  size_t memory_bytes = 0;
  // The build carries sm_90a code for this device (the Hopper-tier kernels have real
  // bodies there: common/hopper_probe.h).
  bool hopper_code = false;
};

}  // namespace msa::MSA_GPU_NS
