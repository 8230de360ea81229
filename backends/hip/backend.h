// The HIP backend (namespace msa::hip): AMD GPUs ("hip:N") through the HIP runtime. Its
// kernels are the CUDA backend's portable tier (backends/cuda/kernels/portable/*.cu)
// compiled by hipcc through backends/cuda/vendor.h; see README.md for what has been run
// where.
#pragma once
#include <memory>
#include <string>

#include "hal/device.h"
#include "hal/registry.h"

namespace msa::hip {

// Devices found by hipGetDeviceCount that this build has code objects for, or why none
// ("hip: no device (hipErrorNoDevice, error 100)").
hal::BackendStatus probe();
// Opens hip:<index>; throws msa::Error when there is no such (usable) device.
std::unique_ptr<hal::Device> open_device(int index);

// The architectures this build has code objects for (MSA_HIP_ARCHS), e.g. "gfx90a, gfx940".
std::string built_archs();
// "" when this build can run on a device of architecture `arch` with wavefront `warp`,
// else why not.
std::string why_unusable(const std::string& arch, int warp);

}  // namespace msa::hip
