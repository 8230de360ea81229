#include "backends/cpu/backend.h"

#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/backend.h"
#include "hal/error.h"
#include "hal/host_device.h"

namespace msa::cpu {

hal::KernelTable make_kernel_table() {
  using hal::OpId;
  // Start from the reference so every op exists, then put the SIMD kernels on top.
  hal::KernelTable t = cpu_ref::make_kernel_table();
#define MSA_SET_KERNEL(name) t.set<ops::ArgsOf<OpId::name>>(OpId::name, &name);
  MSA_CPU_OPS(MSA_SET_KERNEL)
#undef MSA_SET_KERNEL
  return t;
}

hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "cpu";
  s.compiled = true;
  s.devices = {"cpu"};
  s.descriptions = {"Highway " + simd_target() + " + oneTBB, " + std::to_string(thread_count()) +
                    " threads, f32 accumulation"};
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) {
  if (index != 0) throw Error("device 'cpu:" + std::to_string(index) + "': cpu has only device 0");
  return std::make_unique<hal::HostDevice>("cpu", "cpu", make_kernel_table(), thread_count());
}

}  // namespace msa::cpu
