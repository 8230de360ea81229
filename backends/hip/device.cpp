// The HIP device and the backend's probe/open entry points. Streams, events, copies and
// the device-side error flag are the CUDA backend's (backends/cuda/stream.cpp, compiled
// for HIP through vendor.h); this file holds only what HIP reports differently.
#include "backends/hip/device.h"

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/check.h"
#include "backends/hip/backend.h"
#include "backends/hip/table.h"
#include "backends/hip/wave_check.h"

#ifndef MSA_HIP_ARCHS
#error "MSA_HIP_ARCHS (the --offload-arch list) must be defined by the build"
#endif

namespace msa::hip {
namespace {

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::vector<std::string> split_archs() {
  std::vector<std::string> r;
  std::string cur;
  for (const char* p = MSA_HIP_ARCHS;; ++p) {
    if (*p == ';' || *p == ',' || *p == '\0') {
      if (!cur.empty()) r.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else if (*p != ' ') {
      cur += *p;
    }
  }
  return r;
}

// "gfx90a:sramecc+:xnack-" -> "gfx90a"
std::string base_arch(const char* gcn) {
  std::string s = gcn;
  if (auto c = s.find(':'); c != std::string::npos) s.resize(c);
  return s;
}

// "hip: <what> (hipErrorNoDevice, error 100)"
std::string hip_reason(const std::string& what, hipError_t err) {
  return "hip: " + what + " (" + hipGetErrorString(err) + ", error " + std::to_string(static_cast<int>(err)) + ")";
}

void release_buffer(hal::Device& device, void* handle, size_t) {
  auto& d = static_cast<HipDevice&>(device);
  // Stream-ordered: the block returns to the pool after the work queued before it.
  (void)hipSetDevice(d.gpu().props().index);
  (void)hipFreeAsync(handle, d.gpu().native());
}

}  // namespace

std::string built_archs() {
  std::string s;
  for (const auto& a : split_archs()) s += (s.empty() ? "" : ", ") + a;
  return s;
}

std::string why_unusable(const std::string& arch, int warp) {
  bool built = false;
  for (const auto& a : split_archs()) built = built || a == arch;
  if (!built) return "no code object for " + arch + " in this build (built for " + built_archs() + ")";
  // Host launch code is compiled once for all architectures with kWarp = MSA_WARP_SIZE;
  // the device code per architecture with that architecture's wavefront.
  if (warp != MSA_WARP_SIZE)
    return arch + " runs wavefront " + std::to_string(warp) + " but this build's host code assumes " +
           std::to_string(MSA_WARP_SIZE);
  return "";
}

HipDevice::HipDevice(int index) : name_("hip:" + std::to_string(index)) {
  hipDeviceProp_t p{};
  MSA_CUDA_CHECK(hipGetDeviceProperties(&p, index));
  hip_.full_arch = p.gcnArchName;
  hip_.arch = base_arch(p.gcnArchName);
  hip_.warp_size = p.warpSize;
  hip_.lds_bytes = p.sharedMemPerBlock;
  if (std::string why = why_unusable(hip_.arch, hip_.warp_size); !why.empty())
    throw Error("device '" + name_ + "': " + why);

  props_.index = index;
  props_.name = p.name;
  props_.sm_count = p.multiProcessorCount;
  props_.cc_major = 0;  // no NVIDIA compute capability: kernels must not branch on it
  props_.cc_minor = 0;
  props_.smem_optin = p.sharedMemPerBlock;  // HIP has no opt-in beyond the LDS per block
  props_.l2_bytes = static_cast<size_t>(p.l2CacheSize);
  props_.memory_bytes = p.totalGlobalMem;

  MSA_CUDA_CHECK(hipSetDevice(index));
  int pools = 0;
  MSA_CUDA_CHECK(hipDeviceGetAttribute(&pools, hipDeviceAttributeMemoryPoolsSupported, index));
  if (pools == 0)
    throw Error("device '" + name_ +
                "': the HIP runtime does not support stream-ordered memory pools here "
                "(hipMallocAsync); a newer ROCm is needed");
  hipMemPool_t pool;
  MSA_CUDA_CHECK(hipDeviceGetDefaultMemPool(&pool, index));
  uint64_t keep = UINT64_MAX;  // cache freed memory instead of returning it to the driver
  MSA_CUDA_CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &keep));
  tuning_ = hal::tuning_from_env(tuning_knobs());
  stream_ = std::make_unique<Stream>(name_, props_);
  stream_->use_tuning(tuning_);

  // The wavefront is taken from the device and checked against the code object.
  const WaveReport w = run_wave_check(stream_->native());
  const int W = hip_.warp_size;
  if (w.hw_warp != W || w.kernel_warp != W || w.lane_sum != W * (W - 1) / 2 || w.ballot_lanes != W)
    throw Error("device '" + name_ + "': wavefront self-check failed on " + hip_.full_arch + ": warpSize " +
                std::to_string(W) + " (device code sees " + std::to_string(w.hw_warp) + ", kernels built for " +
                std::to_string(w.kernel_warp) + "), lane sum " + std::to_string(w.lane_sum) + ", ballot lanes " +
                std::to_string(w.ballot_lanes));
  table_ = make_kernel_table();
}

HipDevice::~HipDevice() = default;

hal::DeviceInfo HipDevice::info() const {
  hal::DeviceInfo i;
  i.backend = "hip";
  i.model = props_.name;
  i.memory_bytes = props_.memory_bytes;
  i.compute_units = props_.sm_count;
  i.details = hip_.full_arch + ", wave" + std::to_string(hip_.warp_size) + ", LDS " +
              std::to_string(hip_.lds_bytes >> 10) + " KiB, L2 " + mib(props_.l2_bytes) + ", tier portable";
  return i;
}

hal::BufferPtr HipDevice::alloc(size_t bytes) {
  if (bytes == 0) return std::make_unique<hal::Buffer>(*this, nullptr, 0, &release_buffer);
  stream_->activate();
  void* p = nullptr;
  hipError_t err = hipMallocAsync(&p, bytes, stream_->native());
  if (err != hipSuccess) {
    (void)hipGetLastError();
    size_t free_b = 0, total_b = 0;
    (void)hipMemGetInfo(&free_b, &total_b);
    throw Error(name_ + ": out of device memory allocating " + std::to_string(bytes) + " bytes (" + mib(bytes) + "; " +
                mib(free_b) + " of " + mib(total_b) + " free): " + hipGetErrorString(err));
  }
  return std::make_unique<hal::Buffer>(*this, p, bytes, &release_buffer);
}

std::unique_ptr<hal::Event> HipDevice::create_event() { return std::make_unique<Event>(props_.index); }

namespace {

// One device the runtime reports: usable (why == "") or not.
struct Found {
  int ordinal = 0;
  std::string description;
  std::string why;
};

// Every device the runtime reports, or the HIP error of hipGetDeviceCount.
hipError_t enumerate(std::vector<Found>& out) {
  int n = 0;
  hipError_t err = hipGetDeviceCount(&n);
  if (err != hipSuccess) {
    (void)hipGetLastError();
    return err;
  }
  for (int i = 0; i < n; ++i) {
    Found f;
    f.ordinal = i;
    hipDeviceProp_t p{};
    if (hipError_t e = hipGetDeviceProperties(&p, i); e != hipSuccess) {
      (void)hipGetLastError();
      f.why = std::string("could not be queried: ") + hipGetErrorString(e);
    } else {
      f.why = why_unusable(base_arch(p.gcnArchName), p.warpSize);
      f.description = std::string(p.name) + ", " + std::to_string(p.totalGlobalMem >> 30) + " GiB, " +
                      std::to_string(p.multiProcessorCount) + " CUs, " + p.gcnArchName + ", wave" +
                      std::to_string(p.warpSize);
    }
    out.push_back(f);
  }
  return hipSuccess;
}

}  // namespace

// "hip:N" is HIP device N (the runtime's ordinal, as HIP_VISIBLE_DEVICES leaves them);
// devices this build cannot run on are left out of the list, with the reason.
hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "hip";
  s.compiled = true;
  std::vector<Found> found;
  if (hipError_t err = enumerate(found); err != hipSuccess) {
    s.unavailable_reason = hip_reason("no device", err);
    return s;
  }
  if (found.empty()) {
    s.unavailable_reason = "hip: no device (the runtime reports 0 devices)";
    return s;
  }
  std::string skipped;
  for (const Found& f : found) {
    const std::string name = "hip:" + std::to_string(f.ordinal);
    if (!f.why.empty()) {
      skipped += " " + name + (f.description.empty() ? "" : " (" + f.description + ")") + ": " + f.why + ";";
      continue;
    }
    s.devices.push_back(name);
    s.descriptions.push_back(f.description);
    s.cpu_emulated.push_back(false);
  }
  if (s.devices.empty()) s.unavailable_reason = "hip: no usable device:" + skipped;
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) {
  const std::string name = "device 'hip:" + std::to_string(index) + "': ";
  std::vector<Found> found;
  if (hipError_t err = enumerate(found); err != hipSuccess) throw Error(name + hip_reason("no device", err));
  if (index < 0 || index >= static_cast<int>(found.size()))
    throw Error(name + "no such device (" + std::to_string(found.size()) + " found)");
  if (!found[index].why.empty()) throw Error(name + found[index].why);
  return std::make_unique<HipDevice>(index);
}

}  // namespace msa::hip
