// hal::Device for Vulkan ("vulkan:N"): owns the context (logical device + compute
// queue), the pipeline cache, the device error-flag buffer and the default stream.
// Buffers handed out are hal::Buffer objects whose handle() is an Allocation*.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/vulkan/context.h"
#include "backends/vulkan/memory.h"
#include "backends/vulkan/pipelines.h"
#include "backends/vulkan/tuning.h"
#include "hal/device.h"

namespace msa::vulkan {

class VulkanStream;

class VulkanDevice : public hal::Device {
 public:
  explicit VulkanDevice(int index);
  ~VulkanDevice() override;

  std::string name() const override { return "vulkan:" + std::to_string(index_); }
  hal::DeviceInfo info() const override;
  hal::BufferPtr alloc(size_t bytes) override;
  hal::Stream& stream() override;
  std::unique_ptr<hal::Event> create_event() override;
  const hal::KernelTable& kernels() const override { return table_; }

  const Context& ctx() const { return *ctx_; }
  const Caps& caps() const { return ctx_->caps; }
  std::vector<hal::TuningEntry> tuning() const override { return hal::list_tuning(tuning_, tuning_knobs()); }
  void set_tuning(std::string_view knob, std::string_view value) override {
    hal::set_tuning_knob(tuning_, tuning_knobs(), name(), knob, value);
  }
  const Tuning& settings() const { return tuning_; }
  PipelineCache& pipelines() { return *pipelines_; }
  VulkanStream& vk_stream() { return *stream_; }
  // Host-visible words, one per OpId, that kernels atomicOr DeviceErrorBits into.
  Allocation* error_flags() const { return errors_; }
  // A small device buffer bound in place of absent optional tensors.
  Allocation* dummy() const { return dummy_; }
  // A device-local scratch buffer of at least `bytes`, shared by all kernels (they run in
  // stream order, separated by barriers); grows by replacing it (the old one is freed
  // once the work recorded so far is done).
  Allocation* workspace(uint64_t bytes);

 private:
  int index_;
  std::unique_ptr<Context> ctx_;
  Tuning tuning_ = hal::tuning_from_env(tuning_knobs());
  std::unique_ptr<PipelineCache> pipelines_;
  Allocation* errors_ = nullptr;
  Allocation* dummy_ = nullptr;
  Allocation* workspace_ = nullptr;
  std::unique_ptr<VulkanStream> stream_;
  hal::KernelTable table_;
};

// The VulkanDevice a tensor lives on; throws msa::Error naming `what` if it is absent
// or not a Vulkan buffer.
VulkanDevice& device_of(const hal::Tensor& t, const char* what);

}  // namespace msa::vulkan
