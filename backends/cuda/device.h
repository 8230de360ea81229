// The CUDA device ("cuda:N"): memory from the device's stream-ordered pool (cudaMallocAsync
// with an unlimited release threshold, i.e. a caching allocator), one stream, events,
// and the kernel table (table.cpp).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cuda/stream.h"
#include "hal/device.h"

namespace msa::MSA_GPU_NS {

class Device final : public hal::Device {
 public:
  explicit Device(int index);
  ~Device() override;
  std::string name() const override { return name_; }
  hal::DeviceInfo info() const override;
  hal::BufferPtr alloc(size_t bytes) override;
  hal::Stream& stream() override { return *active_; }
  std::unique_ptr<hal::Event> create_event() override;
  const hal::KernelTable& kernels() const override { return table_; }
  // Caller-owned device memory of this device (not freed here).
  hal::BufferPtr wrap_memory(void* ptr, size_t bytes) override;
  // `native` is a cudaStream_t of this device (see hal::Device).
  void use_native_stream(void* native) override;
  // Applies to wrapped streams only: the device's own stream keeps the device pool.
  void set_workspace_provider(WorkspaceProvider provider) override;

  // The stream ops run on now (the device's own, or a wrapped native one).
  Stream& gpu() { return *active_; }
  // The stream the device created (buffers are allocated and freed in its order).
  Stream& own_stream() { return *stream_; }
  std::vector<hal::TuningEntry> tuning() const override;
  void set_tuning(std::string_view name, std::string_view value) override;

 private:
  std::string name_;
  DeviceProps props_;
  Tuning tuning_;                  // shared by every stream of the device
  int* flag_pool_ = nullptr;       // device int[2 * Stream::kFlagSlots], zeroed at open
  int* host_flag_pool_ = nullptr;  // pinned, same size
  std::unique_ptr<Stream> stream_;
  std::unordered_map<cudaStream_t, std::unique_ptr<Stream>> wrapped_;
  Stream* active_ = nullptr;
  WorkspaceProvider provider_;
  hal::KernelTable table_;
};

// Reads the properties of device `index`.
DeviceProps read_props(int index);
// The kernel table (table.cpp).
hal::KernelTable make_kernel_table();

}  // namespace msa::MSA_GPU_NS
