// The HIP backend's kernel table: the portable tier (backends/cuda/portable_table.h)
// under AMD's limits. Used by the HIP backend and by the CPU emulation tests
// (tests/hip), so both see the same table.
#pragma once
#include "backends/cuda/vendor.h"
#include "hal/kernel_table.h"

namespace msa::MSA_GPU_NS {

hal::KernelTable make_kernel_table();

}  // namespace msa::MSA_GPU_NS
