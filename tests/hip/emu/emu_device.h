// An hal::Device whose kernels are the portable tier running in the CPU emulation
// (warp_emu.h) at wave MSA_EMU_WARP: the same kernel table the HIP backend builds
// (backends/hip/table.cpp), the CUDA backend's Stream (backends/cuda/stream.cpp) over the
// emulated runtime, host memory as device memory. Built once per wave size, in
// namespace msa::emu32 / msa::emu64.
#pragma once
#include <memory>

#include "hal/device.h"

namespace msa::emu32 {
// "emu-wave32": the portable kernels in the emulation with 32-lane waves (as NVIDIA).
std::unique_ptr<hal::Device> make_emu_device();
}  // namespace msa::emu32
namespace msa::emu64 {
// "emu-wave64": the portable kernels in the emulation with 64-lane waves (as AMD CDNA).
std::unique_ptr<hal::Device> make_emu_device();
}  // namespace msa::emu64
