#include "backends/vulkan/loader.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "hal/error.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace msa::vulkan {

#define MSA_VK_DEFINE(name) PFN_##name name = nullptr;
MSA_VK_GLOBAL_FNS(MSA_VK_DEFINE)
MSA_VK_INSTANCE_FNS(MSA_VK_DEFINE)
#undef MSA_VK_DEFINE

namespace {

PFN_vkGetInstanceProcAddr open_loader() {
#if defined(_WIN32)
  HMODULE lib = LoadLibraryA("vulkan-1.dll");
  if (lib == nullptr) return nullptr;
  return reinterpret_cast<PFN_vkGetInstanceProcAddr>(GetProcAddress(lib, "vkGetInstanceProcAddr"));
#else
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libvulkan.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  return reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
#endif
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

VkInstance create_instance() {
  PFN_vkGetInstanceProcAddr gipa = open_loader();
  if (gipa == nullptr) throw Error("vulkan: no Vulkan loader (libvulkan.so.1) found; install libvulkan1 and a driver");
#define MSA_VK_LOAD_GLOBAL(name) name = reinterpret_cast<PFN_##name>(gipa(nullptr, #name));
  MSA_VK_GLOBAL_FNS(MSA_VK_LOAD_GLOBAL)
#undef MSA_VK_LOAD_GLOBAL
  if (vkCreateInstance == nullptr) throw Error("vulkan: the loader lacks vkCreateInstance");
  uint32_t version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion != nullptr) vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_2)
    throw Error("vulkan: the loader supports only Vulkan " + std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
                std::to_string(VK_API_VERSION_MINOR(version)) + " (msa needs 1.2)");

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "msa";
  app.pEngineName = "msa";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  std::vector<const char*> layers;
#ifndef NDEBUG
  // Debug builds run under the Khronos validation layer when it is installed.
  if (has_layer("VK_LAYER_KHRONOS_validation")) layers.push_back("VK_LAYER_KHRONOS_validation");
#else
  (void)&has_layer;
#endif
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  VkInstance inst = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&ci, nullptr, &inst);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    throw Error("vulkan: no Vulkan driver (ICD) installed or none supports Vulkan 1.2");
  check(r, "vkCreateInstance");
#define MSA_VK_LOAD_INSTANCE(name)                        \
  name = reinterpret_cast<PFN_##name>(gipa(inst, #name)); \
  if (name == nullptr) throw Error("vulkan: the loader lacks " #name);
  MSA_VK_INSTANCE_FNS(MSA_VK_LOAD_INSTANCE)
#undef MSA_VK_LOAD_INSTANCE
  return inst;
}

}  // namespace

VkInstance instance() {
  static std::mutex mu;
  static VkInstance inst = VK_NULL_HANDLE;
  static std::string failure;
  std::lock_guard<std::mutex> lock(mu);
  if (inst != VK_NULL_HANDLE) return inst;
  if (!failure.empty()) throw Error(failure);
  try {
    inst = create_instance();
  } catch (const Error& e) {
    failure = e.what();
    throw;
  }
  return inst;
}

std::string result_name(VkResult r) {
  switch (r) {
#define MSA_VK_CASE(x) \
  case x:              \
    return #x;
    MSA_VK_CASE(VK_SUCCESS)
    MSA_VK_CASE(VK_NOT_READY)
    MSA_VK_CASE(VK_TIMEOUT)
    MSA_VK_CASE(VK_INCOMPLETE)
    MSA_VK_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    MSA_VK_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    MSA_VK_CASE(VK_ERROR_INITIALIZATION_FAILED)
    MSA_VK_CASE(VK_ERROR_DEVICE_LOST)
    MSA_VK_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    MSA_VK_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    MSA_VK_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    MSA_VK_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    MSA_VK_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    MSA_VK_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    MSA_VK_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    MSA_VK_CASE(VK_ERROR_FRAGMENTED_POOL)
    MSA_VK_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    MSA_VK_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef MSA_VK_CASE
    default:
      return "VkResult(" + std::to_string(static_cast<int>(r)) + ")";
  }
}

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS) throw Error(std::string("vulkan: ") + what + ": " + result_name(r));
}

}  // namespace msa::vulkan
