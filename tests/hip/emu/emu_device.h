// An hal::Device whose kernels are the portable tier running in the CPU emulation
// (warp_emu.h) at wave MSA_EMU_WARP: the same kernel table the HIP backend builds
// (backends/hip/table.cpp), the CUDA backend's Stream (backends/cuda/stream.cpp) over the
// emulated runtime, host memory as device memory. Built once per wave size, in
// namespace msa::emu32 / msa::emu64.
#pragma once
#include <memory>

#include "hal/device.h"

// sm_count: the multiprocessor count the device reports. 2 by default (few blocks: grid-
// stride loops take several turns); a large count sends launchers that size their paths
// by it (block_topk's one-block and split paths: rows <= 2 x SMs) down those paths.
namespace msa::emu32 {
// "emu-wave32": the portable kernels in the emulation with 32-lane waves (as NVIDIA).
std::unique_ptr<hal::Device> make_emu_device(int sm_count = 2);
}  // namespace msa::emu32
namespace msa::emu64 {
// "emu-wave64": the portable kernels in the emulation with 64-lane waves (as AMD CDNA).
std::unique_ptr<hal::Device> make_emu_device(int sm_count = 2);
}  // namespace msa::emu64
