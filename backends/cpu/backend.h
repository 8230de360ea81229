// The `cpu` backend: SIMD kernels on Google Highway (dynamic dispatch: the best target
// the machine supports is chosen at run time) parallelised with oneTBB. Buffers and the
// stream are the host ones (hal::HostDevice). Ops without a SIMD kernel here run the
// cpu-ref kernel, so every op is available.
#pragma once
#include <memory>
#include <string>

#include "hal/device.h"
#include "hal/kernel_table.h"
#include "hal/registry.h"

namespace msa::cpu {

// One device, "cpu"; its description names the thread count and the Highway target.
hal::BackendStatus probe();
// index must be 0.
std::unique_ptr<hal::Device> open_device(int index);
// The kernel table of the backend (SIMD kernels, cpu-ref for the rest).
hal::KernelTable make_kernel_table();

// Worker threads the kernels use: MSA_CPU_THREADS when set (>= 1), else every core.
int thread_count();
// Overrides the thread count for later ops (n >= 1; 0 returns to the default). Results
// do not depend on it: work is split at fixed boundaries and merged in a fixed order.
void set_thread_count(int n);
// Name of the Highway target the kernels dispatch to on this machine ("AVX3", "AVX2").
std::string simd_target();

}  // namespace msa::cpu
