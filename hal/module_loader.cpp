#include "hal/module_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "hal/version.h"

namespace msa::hal {
namespace {

std::string dl_error_text() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

// Why `m` (the entry's answer) cannot serve as backend `name`, "" when it can.
std::string module_mismatch(const msa_backend_module* m, const std::string& name) {
  if (m == nullptr) return "its entry point returned null";
  if (m->abi != kMsaBackendModuleAbi)
    return "module ABI " + std::to_string(m->abi) + ", libmsa expects " + std::to_string(kMsaBackendModuleAbi) +
           " (rebuild the module with this libmsa)";
  if (m->name == nullptr || name != m->name)
    return "it is the module of backend '" + std::string(m->name != nullptr ? m->name : "") + "', not '" + name + "'";
  if (m->msa_version == nullptr || std::strcmp(m->msa_version, version()) != 0)
    return "built for msa " + std::string(m->msa_version != nullptr ? m->msa_version : "?") + ", libmsa is " +
           version() + " (modules come from the same build as libmsa)";
  if (m->probe == nullptr || m->open_device == nullptr) return "it has no probe or open function";
  return "";
}

struct ModuleTable {
  std::mutex mutex;
  std::map<std::string, ModuleLoad> by_name;
};

ModuleTable& module_table() {
  static ModuleTable l;
  return l;
}

}  // namespace

std::string libmsa_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&libmsa_dir), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

ModuleLoad load_backend_module(const std::string& name, const std::string& dir) {
  ModuleLoad r;
  const std::string file = "libmsa_backend_" + name + ".so";
  void* handle = nullptr;
  const std::string beside = dir.empty() ? "" : dir + "/" + file;
  if (!beside.empty() && access(beside.c_str(), F_OK) == 0) {
    // The file is there: its own dlopen error (a missing libcudart, say) is the reason.
    r.path = beside;
    handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      r.error = "cannot load " + beside + ": " + dl_error_text();
      return r;
    }
  } else {
    r.path = file;
    handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const std::string why = dl_error_text();
      if (why.rfind(file + ":", 0) == 0)  // the file itself is on no search path
        r.error = "module " + file + " not found (" + (dir.empty() ? "" : "not in " + dir + ", ") +
                  "not on the library search path: " + why + ")";
      else  // found there, but it cannot be loaded (a library it needs is missing)
        r.error = "cannot load " + file + " (from the library search path): " + why;
      return r;
    }
  }
  dlerror();
  void* entry = dlsym(handle, MSA_BACKEND_MODULE_ENTRY);
  if (entry == nullptr) {
    r.error = r.path + " is not an msa backend module (no " MSA_BACKEND_MODULE_ENTRY ": " + dl_error_text() + ")";
    dlclose(handle);
    return r;
  }
  const msa_backend_module* m = reinterpret_cast<const msa_backend_module* (*)()>(entry)();
  if (std::string why = module_mismatch(m, name); !why.empty()) {
    r.error = "cannot use " + r.path + ": " + why;
    dlclose(handle);
    return r;
  }
  // Never closed: the devices it opens, their vtables and kernels live in it.
  r.module = m;
  return r;
}

const ModuleLoad& backend_module(const std::string& name) {
  ModuleTable& l = module_table();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (auto it = l.by_name.find(name); it != l.by_name.end()) return it->second;
  const char* dir = std::getenv("MSA_BACKEND_DIR");
  ModuleLoad r = load_backend_module(name, dir != nullptr && *dir != '\0' ? std::string(dir) : libmsa_dir());
  return l.by_name.emplace(name, std::move(r)).first->second;
}

void use_linked_backend_module(const msa_backend_module& module) {
  ModuleLoad r;
  r.path = "linked in";
  if (std::string why = module_mismatch(&module, module.name != nullptr ? module.name : ""); !why.empty())
    r.error = "cannot use the linked-in module: " + why;
  else
    r.module = &module;
  ModuleTable& l = module_table();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.by_name.insert_or_assign(module.name != nullptr ? module.name : "", std::move(r));
}

}  // namespace msa::hal
