// The one list of backends, in `auto` preference order: CUDA, HIP, Vulkan, CPU SIMD,
// then the reference. Each backend of the build is named explicitly under its #if; CUDA
// and HIP are modules (hal/module_loader.h), loaded when first probed or opened.
#include "hal/registry.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include "backends/cpu_ref/backend.h"
#include "hal/error.h"
#include "hal/module_loader.h"
#if MSA_HAVE_VULKAN
#include "backends/vulkan/backend.h"
#endif
#if MSA_HAVE_CPU_SIMD
#include "backends/cpu/backend.h"
#endif

namespace msa::hal {
namespace {

struct Entry {
  const char* name;
  const char* not_compiled_reason;  // null when compiled in
  std::function<BackendStatus()> probe;
  std::function<std::unique_ptr<Device>(int)> open;
};

#if MSA_HAVE_CUDA || MSA_HAVE_HIP
// A module's backend: a module that cannot be loaded reports why as its status.
Entry module_entry(const char* name) {
  auto probe = [name] {
    const ModuleLoad& m = backend_module(name);
    if (m.module != nullptr) return m.module->probe();
    BackendStatus s;
    s.name = name;
    s.compiled = true;
    s.unavailable_reason = m.error;
    return s;
  };
  auto open = [name](int index) {
    const ModuleLoad& m = backend_module(name);
    if (m.module == nullptr) throw Error(std::string(name) + ": " + m.error);
    return m.module->open_device(index);
  };
  return {name, nullptr, probe, open};
}
#endif

std::vector<Entry> entries() {
  std::vector<Entry> e;
#if MSA_HAVE_CUDA
  e.push_back(module_entry("cuda"));
#else
  e.push_back({"cuda", "not compiled in (configure with MSA_CUDA=ON and nvcc)", {}, {}});
#endif
#if MSA_HAVE_HIP
  e.push_back(module_entry("hip"));
#else
  e.push_back({"hip", "not compiled in (configure with MSA_HIP=ON and hipcc)", {}, {}});
#endif
#if MSA_HAVE_VULKAN
  e.push_back({"vulkan", nullptr, &vulkan::probe, &vulkan::open_device});
#else
  e.push_back({"vulkan", "not compiled in (configure with MSA_VULKAN=ON, Vulkan SDK and glslang)", {}, {}});
#endif
#if MSA_HAVE_CPU_SIMD
  e.push_back({"cpu", nullptr, &cpu::probe, &cpu::open_device});
#else
  e.push_back({"cpu", "not compiled in (configure with MSA_CPU_SIMD=ON, Highway and oneTBB)", {}, {}});
#endif
  e.push_back({"cpu-ref", nullptr, &cpu_ref::probe, &cpu_ref::open_device});
  return e;
}

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

BackendStatus status_of(const Entry& e) {
  if (e.not_compiled_reason != nullptr) {
    BackendStatus s;
    s.name = e.name;
    s.compiled = false;
    s.unavailable_reason = e.not_compiled_reason;
    return s;
  }
  try {
    return e.probe();
  } catch (const std::exception& ex) {
    BackendStatus s;
    s.name = e.name;
    s.compiled = true;
    s.unavailable_reason = ex.what();
    return s;
  }
}

}  // namespace

std::vector<BackendStatus> list_backends() {
  std::vector<BackendStatus> out;
  for (const auto& e : entries()) out.push_back(status_of(e));
  return out;
}

std::unique_ptr<Device> create_device(std::string_view requested) {
  const std::string name = lower(requested);
  if (name.empty()) throw Error("device '': empty device name (try 'auto', 'cpu', 'cpu-ref', 'cuda:0')");
  if (name == "auto") {
    for (const auto& e : entries()) {
      BackendStatus s = status_of(e);
      for (size_t i = 0; s.compiled && i < s.devices.size(); ++i) {
        const bool emulated = i < s.cpu_emulated.size() && s.cpu_emulated[i];
        if (!emulated) return create_device(s.devices[i]);
      }
    }
    throw Error("device 'auto': no backend has a device");  // unreachable: cpu-ref always has one
  }
  std::string backend = name;
  int index = 0;
  if (auto colon = name.rfind(':'); colon != std::string::npos) {
    backend = name.substr(0, colon);
    const std::string idx = name.substr(colon + 1);
    if (idx.empty() || idx.size() > 6 || !std::all_of(idx.begin(), idx.end(), ::isdigit))
      throw Error("device '" + std::string(requested) + "': device index must be a non-negative integer");
    index = std::stoi(idx);
  }
  if (backend == "cpu_ref" || backend == "ref") backend = "cpu-ref";
  std::string known;
  for (const auto& e : entries()) {
    known += (known.empty() ? "" : ", ") + std::string(e.name);
    if (backend != e.name) continue;
    if (e.not_compiled_reason != nullptr)
      throw Error("device '" + std::string(requested) + "': backend " + e.name + " is " + e.not_compiled_reason);
    BackendStatus s = status_of(e);
    // Device names carry the backend's own index ("vulkan:2" may be the only usable one).
    const std::string full = backend + ":" + std::to_string(index);
    const bool found = std::find(s.devices.begin(), s.devices.end(), full) != s.devices.end() ||
                       (index == 0 && s.devices.size() == 1 && s.devices[0] == backend);
    if (!found) {
      std::string have;
      for (const auto& d : s.devices) have += (have.empty() ? "" : ", ") + d;
      throw Error("device '" + std::string(requested) + "': " +
                  (s.devices.empty() ? "no device: " + s.unavailable_reason : "no such device (found: " + have + ")"));
    }
    return e.open(index);
  }
  throw Error("device '" + std::string(requested) + "': unknown backend (known: auto, " + known + ")");
}

}  // namespace msa::hal
