// hal::HostDevice: the device shape shared by the CPU backends (cpu-ref, cpu). Buffers
// are 64-byte aligned host memory; the stream runs each op synchronously on the calling
// thread, so kernels may throw msa::Error directly for bad index data.
#pragma once
#include <string>

#include "hal/device.h"
#include "hal/export.h"

namespace msa::hal {

// Physical memory of the host in bytes (0 when unknown): the bound host allocations
// driven by input sizes are checked against before they are made.
MSA_API size_t host_memory_bytes();

class MSA_API HostDevice : public Device {
 public:
  HostDevice(std::string name, std::string backend, KernelTable table, int threads);
  ~HostDevice() override;
  std::string name() const override { return name_; }
  DeviceInfo info() const override;
  BufferPtr alloc(size_t bytes) override;
  Stream& stream() override;
  std::unique_ptr<Event> create_event() override;
  const KernelTable& kernels() const override { return table_; }
  bool host_accessible() const override { return true; }

 private:
  std::string name_, backend_;
  KernelTable table_;
  int threads_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace msa::hal
