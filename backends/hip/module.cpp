// The HIP backend's module entry point (hal/backend_module.h): libmsa_backend_hip.so.
#include "backends/hip/backend.h"
#include "hal/backend_module.h"

extern "C" MSA_API const msa_backend_module* msa_backend_module_v1() {
  static const msa_backend_module m{kMsaBackendModuleAbi, "hip", MSA_VERSION_STRING, &msa::hip::probe,
                                    &msa::hip::open_device, nullptr};
  return &m;
}
