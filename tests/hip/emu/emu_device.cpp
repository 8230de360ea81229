// The emulated device of emu_device.h, compiled once per wave size (MSA_GPU_NS).
#include "tests/hip/emu/emu_device.h"

#include <string>

#include "backends/cuda/check.h"
#include "backends/cuda/stream.h"
#include "backends/hip/table.h"

namespace msa::MSA_GPU_NS {
namespace {

class EmuDevice;
void release_buffer(hal::Device&, void* handle, size_t) { cudaFree(handle); }

class EmuDevice final : public hal::Device {
 public:
  explicit EmuDevice(int sm_count) : name_("emu-wave" + std::to_string(MSA_WARP_SIZE)) {
    props_.index = 0;
    props_.name = "CPU emulation, wave" + std::to_string(MSA_WARP_SIZE);
    props_.sm_count = sm_count;
    props_.smem_optin = 64 * 1024;
    props_.memory_bytes = size_t{1} << 30;
    stream_ = std::make_unique<Stream>(name_, props_);
    table_ = make_kernel_table();
  }
  std::string name() const override { return name_; }
  hal::DeviceInfo info() const override {
    hal::DeviceInfo i;
    i.backend = "emu";
    i.model = props_.name;
    i.memory_bytes = props_.memory_bytes;
    i.compute_units = props_.sm_count;
    i.details = "portable tier in the CPU emulation, wave" + std::to_string(MSA_WARP_SIZE);
    return i;
  }
  hal::BufferPtr alloc(size_t bytes) override {
    void* p = nullptr;
    if (bytes != 0) MSA_CUDA_CHECK(cudaMalloc(&p, bytes));
    return std::make_unique<hal::Buffer>(*this, p, bytes, &release_buffer);
  }
  hal::Stream& stream() override { return *stream_; }
  std::unique_ptr<hal::Event> create_event() override { return std::make_unique<Event>(0); }
  const hal::KernelTable& kernels() const override { return table_; }

 private:
  std::string name_;
  DeviceProps props_;
  std::unique_ptr<Stream> stream_;
  hal::KernelTable table_;
};

}  // namespace

std::unique_ptr<hal::Device> make_emu_device(int sm_count) { return std::make_unique<EmuDevice>(sm_count); }

}  // namespace msa::MSA_GPU_NS
