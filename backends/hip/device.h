// The HIP device ("hip:N"): memory from the device's stream-ordered pool (hipMallocAsync,
// freed blocks cached), one stream and events (the CUDA backend's Stream/Event compiled
// for HIP), and the portable kernel table. What differs from the CUDA device is here:
// the properties HIP reports (architecture name, wavefront size read from the device),
// and the check that this build holds a code object for the device's architecture.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/stream.h"
#include "hal/device.h"

namespace msa::hip {

// What HIP says about one device, beyond DeviceProps.
struct HipProps {
  std::string arch;       // "gfx90a" (gcnArchName up to the first ':')
  std::string full_arch;  // "gfx90a:sramecc+:xnack-"
  int warp_size = 0;      // hipDeviceProp_t::warpSize: 64 on CDNA/GCN, 32 on RDNA
  size_t lds_bytes = 0;   // shared memory (LDS) per block
};

class HipDevice final : public hal::Device {
 public:
  // Opens HIP device `index` as "hip:<index>"; throws msa::Error when it cannot be used
  // (why_unusable, or the wavefront self-check fails).
  explicit HipDevice(int index);
  ~HipDevice() override;
  std::string name() const override { return name_; }
  hal::DeviceInfo info() const override;
  hal::BufferPtr alloc(size_t bytes) override;
  hal::Stream& stream() override { return *stream_; }
  std::unique_ptr<hal::Event> create_event() override;
  const hal::KernelTable& kernels() const override { return table_; }
  std::vector<hal::TuningEntry> tuning() const override { return hal::list_tuning(tuning_, tuning_knobs()); }
  void set_tuning(std::string_view name, std::string_view value) override {
    hal::set_tuning_knob(tuning_, tuning_knobs(), name_, name, value);
  }

  Stream& gpu() { return *stream_; }

 private:
  std::string name_;
  DeviceProps props_;
  Tuning tuning_;  // shared by the device's streams
  HipProps hip_;
  std::unique_ptr<Stream> stream_;
  hal::KernelTable table_;
};

}  // namespace msa::hip
