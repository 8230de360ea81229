// Finding and opening the backend modules (hal/backend_module.h) for the registry.
#pragma once
#include <string>

#include "hal/backend_module.h"
#include "hal/export.h"

namespace msa::hal {

// One backend module as the registry found it.
struct ModuleLoad {
  const msa_backend_module* module = nullptr;  // null when it cannot be used
  std::string path;                            // the file it came from, or "linked in"
  std::string error;                           // why it cannot be used ("" when it can)
};

// Opens <dir>/libmsa_backend_<name>.so when that file exists, else libmsa_backend_<name>.so
// on the dynamic linker's search path, and checks its entry point, ABI, name and msa
// version. Never throws: a missing file or a failed dlopen (e.g. libcudart absent) is
// reported in `error` with dlerror()'s text. A loaded module stays loaded.
MSA_API ModuleLoad load_backend_module(const std::string& name, const std::string& dir);

// The folder libmsa was loaded from (where the modules are built and installed).
MSA_API std::string libmsa_dir();

// The module of backend `name` for this process, loaded on first use from
// $MSA_BACKEND_DIR when set, else libmsa_dir() (then the search path).
const ModuleLoad& backend_module(const std::string& name);

// Makes the registry use `module`, linked into the program, instead of loading the file:
// for test programs that link a backend's static library to reach its internals, so that
// the process holds one copy of the backend. Call before the registry first probes it.
MSA_API void use_linked_backend_module(const msa_backend_module& module);

}  // namespace msa::hal
