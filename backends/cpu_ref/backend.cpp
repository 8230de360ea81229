#include "backends/cpu_ref/backend.h"

#include "backends/cpu_ref/kernels.h"
#include "hal/error.h"
#include "hal/host_device.h"

namespace msa::cpu_ref {

hal::KernelTable make_kernel_table() {
  using hal::OpId;
  hal::KernelTable t;
#define MSA_SET_KERNEL(name, Args) t.set<ops::Args>(OpId::name, &name);
  MSA_FOR_EACH_KERNEL_OP(MSA_SET_KERNEL)
#undef MSA_SET_KERNEL
  return t;
}

hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "cpu-ref";
  s.compiled = true;
  s.devices = {"cpu-ref"};
  s.descriptions = {"scalar reference, 1 thread, f64 accumulation"};
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) {
  if (index != 0) throw Error("device 'cpu-ref:" + std::to_string(index) + "': cpu-ref has only device 0");
  return std::make_unique<hal::HostDevice>("cpu-ref", "cpu-ref", make_kernel_table(), 1);
}

}  // namespace msa::cpu_ref
