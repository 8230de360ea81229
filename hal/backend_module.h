// The interface of a backend built as a separate module (libmsa_backend_cuda.so,
// libmsa_backend_hip.so): libmsa's registry dlopen()s the module and calls its one C entry
// point, msa_backend_module_v1, for the functions below. The module links libmsa for the
// hal types it implements (exported with MSA_API), so a process has one copy of hal.
// A module and libmsa come from the same build: the entry checks the ABI number and msa's
// version, and the hal classes passed here are C++ (no stable ABI across versions).
#pragma once
#include <memory>
#include <vector>

#include "hal/device.h"
#include "hal/export.h"
#include "hal/registry.h"

namespace msa::dist {
class Communicator;  // dist/communicator.h (a layer above hal)
}

// Changes when this struct, or how its functions are called, changes.
inline constexpr int kMsaBackendModuleAbi = 1;

struct msa_backend_module {
  int abi;                  // kMsaBackendModuleAbi of the module's build
  const char* name;         // the backend's name in the registry: "cuda", "hip"
  const char* msa_version;  // msa's version at the module's build (libmsa's must be equal)
  msa::hal::BackendStatus (*probe)();
  std::unique_ptr<msa::hal::Device> (*open_device)(int index);
  // Communicators for ranks on this backend's devices (dist::World); null when the
  // module has no transport (a CUDA build without NCCL, HIP).
  std::vector<std::unique_ptr<msa::dist::Communicator>> (*make_communicators)(
      const std::vector<msa::hal::Device*>& devices);
};

// The name the registry looks up in each module file (dlsym); a module defines it once.
#define MSA_BACKEND_MODULE_ENTRY "msa_backend_module_v1"
extern "C" MSA_API const msa_backend_module* msa_backend_module_v1();
