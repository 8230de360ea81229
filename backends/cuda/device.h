// The CUDA device ("cuda:N"): memory from the device's stream-ordered pool (cudaMallocAsync
// with an unlimited release threshold, i.e. a caching allocator), one stream, events,
// and the kernel table (table.cpp).
#pragma once
#include <memory>
#include <string>

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
  hal::Stream& stream() override { return *stream_; }
  std::unique_ptr<hal::Event> create_event() override;
  const hal::KernelTable& kernels() const override { return table_; }

  Stream& gpu() { return *stream_; }

 private:
  std::string name_;
  DeviceProps props_;
  std::unique_ptr<Stream> stream_;
  hal::KernelTable table_;
};

// Reads the properties of device `index` (tier from MSA_CUDA_TIER).
DeviceProps read_props(int index);
// The kernel table (table.cpp).
hal::KernelTable make_kernel_table();

}  // namespace msa::MSA_GPU_NS
