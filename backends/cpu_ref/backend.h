// The cpu-ref backend: plain scalar C++, one thread, f64 accumulation. The executable
// form of the op contract; every other backend is checked against it.
#pragma once
#include <memory>

#include "hal/device.h"
#include "hal/kernel_table.h"
#include "hal/registry.h"

namespace msa::cpu_ref {

// Always available.
hal::BackendStatus probe();
// index must be 0.
std::unique_ptr<hal::Device> open_device(int index);
// The reference kernels (also used by the `cpu` backend for ops it does not vectorise).
hal::KernelTable make_kernel_table();

}  // namespace msa::cpu_ref
