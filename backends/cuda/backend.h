// The CUDA backend (namespace msa::cuda): devices "cuda:N" found through the CUDA runtime.
#pragma once
#include <memory>

#include "hal/device.h"
#include "hal/registry.h"

namespace msa::cuda {

// Devices found by cudaGetDeviceCount, or why none ("no CUDA driver/device: <message>").
hal::BackendStatus probe();
// Opens cuda:<index>; throws msa::Error when there is no such device.
std::unique_ptr<hal::Device> open_device(int index);

}  // namespace msa::cuda
