// The CUDA device: a caching allocator (the device's default stream-ordered memory pool
// with an unlimited release threshold: freed blocks stay in the pool for reuse), one
// stream, events, and the backend's probe/open entry points.
#include "backends/cuda/device.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cuda/backend.h"
#include "backends/cuda/check.h"
#include "backends/cuda/kernels/common/hopper_probe.h"

namespace msa::MSA_GPU_NS {
namespace {

std::string mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Buffers are allocated and freed on the device's own stream, whatever stream is active.
void release_buffer(hal::Device& device, void* handle, size_t) {
  auto& d = static_cast<Device&>(device);
  // Stream-ordered: the block returns to the pool after the work queued before it.
  Stream& own = d.own_stream();
  cudaSetDevice(own.props().index);
  cudaFreeAsync(handle, own.native());
}

}  // namespace

DeviceProps read_props(int index) {
  cudaDeviceProp p{};
  MSA_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  DeviceProps r;
  r.index = index;
  r.name = p.name;
  r.sm_count = p.multiProcessorCount;
  r.cc_major = p.major;
  r.cc_minor = p.minor;
  r.smem_optin = p.sharedMemPerBlockOptin;
  r.l2_bytes = static_cast<size_t>(p.l2CacheSize);
  r.memory_bytes = p.totalGlobalMem;
  r.hopper_code = p.major >= 9 && hopper_code_present(index);
  return r;
}

Device::Device(int index) : name_(std::string(MSA_VENDOR_NAME) + ":" + std::to_string(index)) {
  props_ = read_props(index);
  tuning_ = hal::tuning_from_env(tuning_knobs());
  MSA_CUDA_CHECK(cudaSetDevice(index));
  int pools = 0;
  MSA_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, index));
  if (pools == 0) throw Error(name_ + ": the device does not support stream-ordered memory pools");
  cudaMemPool_t pool;
  MSA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
  uint64_t keep = UINT64_MAX;  // cache freed memory instead of returning it to the driver
  MSA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const size_t flag_bytes = 2 * Stream::kFlagSlots * sizeof(int);
  MSA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&flag_pool_), flag_bytes));
  MSA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_flag_pool_), flag_bytes));
  MSA_CUDA_CHECK(cudaMemset(flag_pool_, 0, flag_bytes));
  MSA_CUDA_CHECK(cudaDeviceSynchronize());
  stream_ = std::make_unique<Stream>(name_, props_, nullptr, flag_pool_, host_flag_pool_);
  stream_->use_tuning(tuning_);
  active_ = stream_.get();
  table_ = make_kernel_table();
}

Device::~Device() {
  // Work queued on wrapped streams finishes before their counter slots are handed back.
  cudaSetDevice(props_.index);
  if (!wrapped_.empty()) cudaDeviceSynchronize();
  wrapped_.clear();
  stream_.reset();
  cudaSetDevice(props_.index);
  if (flag_pool_ != nullptr) cudaFree(flag_pool_);
  if (host_flag_pool_ != nullptr) cudaFreeHost(host_flag_pool_);
}

hal::BufferPtr Device::wrap_memory(void* ptr, size_t bytes) {
  if (ptr == nullptr && bytes != 0) throw ArgError(name_ + ": wrap_memory: argument 'ptr': is null");
  return std::make_unique<hal::Buffer>(*this, ptr, bytes, nullptr);
}

void Device::use_native_stream(void* native) {
  if (native == nullptr) {
    active_ = stream_.get();
    return;
  }
  auto key = static_cast<cudaStream_t>(native);
  auto it = wrapped_.find(key);
  if (it == wrapped_.end()) {
    auto s = std::make_unique<Stream>(name_, props_, key, flag_pool_, host_flag_pool_);
    if (provider_) s->set_workspace_provider(provider_);
    s->use_tuning(tuning_);
    it = wrapped_.emplace(key, std::move(s)).first;
  }
  active_ = it->second.get();
}

void Device::set_workspace_provider(WorkspaceProvider provider) {
  provider_ = std::move(provider);
  for (auto& [native, s] : wrapped_) s->set_workspace_provider(provider_);
}

hal::DeviceInfo Device::info() const {
  hal::DeviceInfo i;
  i.backend = MSA_VENDOR_NAME;
  i.model = props_.name;
  i.memory_bytes = props_.memory_bytes;
  i.compute_units = props_.sm_count;
  i.details = "sm_" + std::to_string(props_.cc_major) + std::to_string(props_.cc_minor) + ", L2 " +
              mib(props_.l2_bytes) + ", tier " + (tuning_.native() ? "native" : "portable");
  return i;
}

std::vector<hal::TuningEntry> Device::tuning() const { return hal::list_tuning(tuning_, tuning_knobs()); }

void Device::set_tuning(std::string_view name, std::string_view value) {
  hal::set_tuning_knob(tuning_, tuning_knobs(), name_, name, value);
}

hal::BufferPtr Device::alloc(size_t bytes) {
  if (bytes == 0) return std::make_unique<hal::Buffer>(*this, nullptr, 0, &release_buffer);
  stream_->activate();
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes, stream_->native());
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error(name_ + ": out of device memory allocating " + std::to_string(bytes) + " bytes (" + mib(bytes) + "; " +
                mib(free_b) + " of " + mib(total_b) + " free): " + cudaGetErrorString(err));
  }
  return std::make_unique<hal::Buffer>(*this, p, bytes, &release_buffer);
}

std::unique_ptr<hal::Event> Device::create_event() { return std::make_unique<Event>(props_.index); }

}  // namespace msa::MSA_GPU_NS

namespace msa::cuda {

hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "cuda";
  s.compiled = true;
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    s.unavailable_reason = std::string("no CUDA driver/device: ") + cudaGetErrorString(err) + " (error " +
                           std::to_string(static_cast<int>(err)) + ")";
    return s;
  }
  if (n == 0) {
    s.unavailable_reason = "no CUDA driver/device: the driver reports 0 devices";
    return s;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    s.devices.push_back("cuda:" + std::to_string(i));
    s.descriptions.push_back(std::string(p.name) + ", " + std::to_string(p.totalGlobalMem >> 30) + " GiB, " +
                             std::to_string(p.multiProcessorCount) + " SMs, sm_" + std::to_string(p.major) +
                             std::to_string(p.minor));
  }
  if (s.devices.empty()) s.unavailable_reason = "no CUDA driver/device: no device could be queried";
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error("device 'cuda:" + std::to_string(index) + "': no CUDA driver/device: " + cudaGetErrorString(err));
  }
  if (index < 0 || index >= n)
    throw Error("device 'cuda:" + std::to_string(index) + "': no such device (" + std::to_string(n) + " found)");
  return std::make_unique<Device>(index);
}

}  // namespace msa::cuda
