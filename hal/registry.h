// The backend registry: opens devices by name. The one explicit list of compiled-in
// backends lives in backends/registry.cpp (CUDA, HIP, Vulkan, CPU SIMD, then cpu-ref).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hal/device.h"
#include "hal/export.h"

namespace msa::hal {

// One backend as the registry sees it.
struct BackendStatus {
  std::string name;                       // "cuda"
  bool compiled = false;                  // built into this binary
  std::vector<std::string> devices;       // names of the devices found ("cuda:0")
  std::vector<std::string> descriptions;  // one line per device (model, memory)
  // Devices (by index into `devices`) that run on the host CPU through an emulating
  // driver (e.g. Mesa's lavapipe); `auto` passes over them in favour of the CPU backends.
  std::vector<bool> cpu_emulated;
  std::string unavailable_reason;  // why there are no devices ("" when some)
};

// Every backend msa knows, compiled in or not, in `auto` preference order.
MSA_API std::vector<BackendStatus> list_backends();

// Opens a device by name, case-insensitive: "cpu-ref", "cpu", "cuda", "cuda:0", "hip:1",
// "vulkan:0", or "auto" (best available: CUDA, HIP, Vulkan, CPU SIMD, then the reference;
// a device that only emulates a GPU on the CPU, such as lavapipe, is not chosen by auto).
// A bare backend name means its device 0. Throws msa::Error naming the device and why
// it cannot be opened (unknown name, not compiled in, no such device).
MSA_API std::unique_ptr<Device> create_device(std::string_view name);

}  // namespace msa::hal
