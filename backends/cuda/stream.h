// The GPU stream, event and device-property types of the CUDA backend (also compiled for
// HIP through vendor.h). Kernels reach the native stream, the device-side error flag,
// the device's properties and the stream-ordered workspace through gpu_stream(s).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "backends/cuda/vendor.h"
#include "hal/event.h"
#include "hal/stream.h"

namespace msa::MSA_GPU_NS {

class Event final : public hal::Event {
 public:
  explicit Event(int device_index);
  ~Event() override;
  double elapsed_ms(const hal::Event& start) const override;
  cudaEvent_t native() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class Stream final : public hal::Stream {
 public:
  // Scratch memory from the caller's allocator (hal::Device::WorkspaceProvider).
  using WorkspaceProvider = std::function<void*(size_t bytes)>;

  // `device_name` ("cuda:0") prefixes error messages. With `external` null the stream is
  // created and owned; otherwise it is the caller's and is never destroyed here.
  // `flag_pool` / `host_flag_pool` (device / pinned int[2 * kFlagSlots], zeroed) lend the
  // error flags of this stream's counter slot, so that wrapping a stream allocates
  // nothing (it may happen inside a graph capture); without them, or without a free slot,
  // the stream allocates its own.
  Stream(std::string device_name, const DeviceProps& props, cudaStream_t external = nullptr, int* flag_pool = nullptr,
         int* host_flag_pool = nullptr);
  static constexpr int kFlagSlots = 64;
  ~Stream() override;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void upload(const hal::Tensor& dst, const void* src) override;
  void download(void* dst, const hal::Tensor& src) override;
  void copy(const hal::Tensor& dst, const hal::Tensor& src) override;
  void fill_bytes(const hal::Tensor& dst, uint8_t byte) override;
  void record(hal::Event& event) override;
  // Waits, then raises (and clears) the device-side validation flag as msa::Error.
  void synchronize() override;

  // Makes this stream's device current (cheap when it already is).
  void activate() const;
  cudaStream_t native() const { return stream_; }
  // int[2] in device memory: see error_flags.h.
  int* error_flag() const { return flag_; }
  const DeviceProps& props() const { return props_; }
  // The kernel-choice settings of this stream's device (tuning.h).
  const Tuning& tuning() const { return *tuning_; }
  // `t` outlives the stream (the device's own settings).
  void use_tuning(const Tuning& t) { tuning_ = &t; }
  const std::string& device_name() const { return name_; }
  // Scratch of at least `bytes`, valid for work enqueued until the next call (every op
  // runs in stream order, so one op's scratch is free once the next op asks). Grows
  // stream-ordered (cudaFreeAsync/cudaMallocAsync, graph-capturable); never shrinks.
  // With a provider, scratch comes from it; during a graph capture each capture gets its
  // own (the provider's allocator must serve captures, as torch's does).
  void* workspace(size_t bytes);
  void set_workspace_provider(WorkspaceProvider provider);
  // Per-stream state of CUDA-only kernel files (the cuBLAS handle), created lazily.
  std::shared_ptr<void>& extension(int slot) { return ext_[slot]; }
  // This stream's index into the per-stream device state of kernels that keep some
  // (arrival counters that concurrent launches must not share): the lowest index free on
  // its device at construction, returned to the pool by the destructor; -1 if none was free.
  int counter_slot() const { return counter_slot_; }
  bool owns_stream() const { return owns_stream_; }

 private:
  std::string name_;
  DeviceProps props_;
  const Tuning* tuning_ = &default_tuning();
  void* provided_workspace(size_t bytes);

  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = true;
  int* flag_ = nullptr;       // device
  int* host_flag_ = nullptr;  // pinned
  bool owns_flags_ = true;
  void* ws_ = nullptr;  // from cudaMallocAsync, or from provider_ when set
  size_t ws_bytes_ = 0;
  WorkspaceProvider provider_;
  void* capture_ws_ = nullptr;  // provider_'s scratch for the capture capture_id_
  size_t capture_ws_bytes_ = 0;
  unsigned long long capture_id_ = 0;
  std::shared_ptr<void> ext_[2];
  int counter_slot_ = -1;
};

// The CUDA stream behind a hal::Stream of this backend (made current).
inline Stream& gpu_stream(hal::Stream& s) {
  auto& g = static_cast<Stream&>(s);
  g.activate();
  return g;
}

}  // namespace msa::MSA_GPU_NS
