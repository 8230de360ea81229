// The HIP backend's module entry point (hal/backend_module.h): libmsa_backend_hip.so.
#include "backends/hip/backend.h"
#include "hal/backend_module.h"

extern "C" MSA_API const msa_backend_module* msa_backend_module_v1() {
  static const msa_backend_module m{.abi = kMsaBackendModuleAbi,
                                    .name = "hip",
                                    .msa_version = MSA_VERSION_STRING,
                                    .probe = &msa::hip::probe,
                                    .open_device = &msa::hip::open_device,
                                    .make_communicators = nullptr};
  return &m;
}
