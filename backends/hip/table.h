// The kernel table of the portable tier: every op whose kernels/portable/<op>.cu exists
// (the build defines MSA_PORTABLE_<OP>=1 for each, see portable_ops.cmake), with the
// sizes those kernels do not cover refused. Used by the HIP backend and by the CPU
// emulation tests (tests/hip), so both see the same table.
#pragma once
#include "backends/cuda/vendor.h"
#include "hal/kernel_table.h"

namespace msa::MSA_GPU_NS {

hal::KernelTable make_portable_table();

}  // namespace msa::MSA_GPU_NS
