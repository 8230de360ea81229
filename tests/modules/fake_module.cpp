// A backend module for tests/modules: backend "fake", one device, which is a cpu-ref
// device. Built once usable and once per way the loader must refuse a module:
// MSA_TEST_MODULE_ABI, _VERSION or _NAME give a wrong value; _NO_ENTRY leaves out the
// entry point; _DEP makes it need a library the dynamic linker cannot find.
#include "hal/backend_module.h"
#include "hal/registry.h"

#ifndef MSA_TEST_MODULE_ABI
#define MSA_TEST_MODULE_ABI kMsaBackendModuleAbi
#endif
#ifndef MSA_TEST_MODULE_VERSION
#define MSA_TEST_MODULE_VERSION MSA_VERSION_STRING
#endif
#ifndef MSA_TEST_MODULE_NAME
#define MSA_TEST_MODULE_NAME "fake"
#endif

#if MSA_TEST_MODULE_DEP
extern "C" int msa_test_module_needed();
#endif

namespace {

msa::hal::BackendStatus probe() {
  msa::hal::BackendStatus s;
  s.name = "fake";
  s.compiled = true;
  s.devices = {"fake:0"};
  s.descriptions = {"a cpu-ref device, from a module"};
#if MSA_TEST_MODULE_DEP
  s.descriptions[0] += std::to_string(msa_test_module_needed());
#endif
  return s;
}

std::unique_ptr<msa::hal::Device> open_device(int index) {
  if (index != 0) throw msa::Error("fake: no device " + std::to_string(index));
  return msa::hal::create_device("cpu-ref");
}

}  // namespace

#if !MSA_TEST_MODULE_NO_ENTRY
extern "C" MSA_API const msa_backend_module* msa_backend_module_v1() {
  static const msa_backend_module m{.abi = MSA_TEST_MODULE_ABI,
                                    .name = MSA_TEST_MODULE_NAME,
                                    .msa_version = MSA_TEST_MODULE_VERSION,
                                    .probe = &probe,
                                    .open_device = &open_device,
                                    .make_communicators = nullptr};
  return &m;
}
#else
// Something to export, so the file is a valid module without the entry point.
extern "C" MSA_API int msa_test_module_without_entry() { return 0; }
#endif
