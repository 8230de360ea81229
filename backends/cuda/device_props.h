// What kernels and their choosers need to know about a GPU device, read once at open.
// Plain C++ (no runtime calls), so that the choosers and their tests compile without
// the CUDA runtime.
#pragma once
#include <cstddef>
#include <string>

#include "backends/cuda/vendor.h"

namespace msa::MSA_GPU_NS {

struct DeviceProps {
  int index = 0;     // device ordinal
  std::string name;  // "NVIDIA H200"
  int sm_count = 1;  // multiprocessors
  int cc_major = 0, cc_minor = 0;
  size_t smem_optin = 48 * 1024;  // max dynamic shared memory per block after opt-in
  size_t l2_bytes = 0;
  size_t memory_bytes = 0;
  // The build carries real sm_90a code for this device (hopper_probe.h): the Hopper-tier
  // kernels (wgmma, TMA) run only then.
  bool hopper_code = false;
};

}  // namespace msa::MSA_GPU_NS
