// The CUDA backend's module entry point (hal/backend_module.h): libmsa_backend_cuda.so.
#include "backends/cuda/backend.h"
#include "hal/backend_module.h"
#if MSA_HAVE_NCCL
#include "dist/nccl.h"
#endif

extern "C" MSA_API const msa_backend_module* msa_backend_module_v1() {
#if MSA_HAVE_NCCL
  constexpr auto communicators = &msa::dist::make_nccl_communicators;
#else
  constexpr decltype(msa_backend_module::make_communicators) communicators = nullptr;
#endif
  static const msa_backend_module m{.abi = kMsaBackendModuleAbi,
                                    .name = "cuda",
                                    .msa_version = MSA_VERSION_STRING,
                                    .probe = &msa::cuda::probe,
                                    .open_device = &msa::cuda::open_device,
                                    .make_communicators = communicators};
  return &m;
}
