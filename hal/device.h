// hal::Device: one compute device of one backend ("cpu-ref", "cpu", "cuda:0",
// "vulkan:1"). Owns its default stream and its kernel table. Not thread-safe.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "hal/buffer.h"
#include "hal/event.h"
#include "hal/export.h"
#include "hal/kernel_table.h"
#include "hal/stream.h"
#include "hal/tuning.h"

namespace msa::hal {

// What `msa devices` prints about a device.
struct DeviceInfo {
  std::string backend;      // "cuda"
  std::string model;        // "NVIDIA H200"
  size_t memory_bytes = 0;  // device memory (host RAM for CPU backends)
  int compute_units = 0;    // SMs, CUs, or CPU threads
  std::string details;      // free text: ISA, driver, subgroup size, tier...
};

class MSA_API Device {
 public:
  virtual ~Device() = default;
  // Canonical name, e.g. "cuda:0", "cpu-ref".
  virtual std::string name() const = 0;
  // Model, memory and limits.
  virtual DeviceInfo info() const = 0;
  // Allocates `bytes` (0 allowed) of device memory; throws msa::Error when it does not fit.
  virtual BufferPtr alloc(size_t bytes) = 0;
  // The device's default stream; every op of ops:: runs on it.
  virtual Stream& stream() = 0;
  // A new event for timing work on stream().
  virtual std::unique_ptr<Event> create_event() = 0;
  // The kernels this backend offers (absent entries say why).
  virtual const KernelTable& kernels() const = 0;
  // True when buffers are plain host memory readable by the CPU (cpu-ref, cpu).
  virtual bool host_accessible() const { return false; }

  // Caller-owned memory as a Buffer of this device, not freed by it: host memory on the
  // CPU backends, device memory (a pointer the caller allocated on this device) on CUDA.
  // The caller keeps the memory alive while tensors over the buffer are in use. Throws
  // msa::Error on backends whose buffers are not addresses (Vulkan).
  virtual BufferPtr wrap_memory(void* ptr, size_t bytes);
  // Makes stream() (and so every op) enqueue on the caller's native stream (a
  // cudaStream_t on CUDA; cudaStreamLegacy for the legacy default stream) until this is
  // called again; nullptr returns to the device's own stream. The device keeps one msa
  // stream per native stream it has seen (its error flag and workspace) for its
  // lifetime; the native stream must stay valid while ops run on it (the device may
  // outlive it). Throws msa::Error on backends without native streams (any non-null).
  virtual void use_native_stream(void* native);
  // Where the streams of this device take their scratch memory: `provider(bytes)` returns
  // device memory of at least `bytes` that stays valid for the work enqueued until the
  // provider is next called for the same stream (a framework's caching allocator: torch's,
  // which also serves CUDA-graph captures). Empty: the device's own pool. Ignored by
  // backends that keep no scratch on the device.
  using WorkspaceProvider = std::function<void*(size_t bytes)>;
  virtual void set_workspace_provider(WorkspaceProvider provider) { (void)provider; }

  // The kernel-choice knobs of this device (hal/tuning.h) and their current values; empty
  // on backends with a single kernel per op.
  virtual std::vector<TuningEntry> tuning() const { return {}; }
  // Sets one knob (a number, on/off, or a value name such as "portable") for the ops
  // enqueued from now on, on every stream of this device. ArgError naming the knob when
  // this device has no such knob or the value is out of its range.
  virtual void set_tuning(std::string_view name, std::string_view value);

  // "" when `op` runs with `args` (the op's Args struct) here, else the reason.
  std::string supports(OpId op, const void* args) const;

  // Allocates a buffer for a tensor of this dtype and shape and returns both.
  struct Owned {
    BufferPtr buffer;
    Tensor tensor;
  };
  Owned alloc_tensor(DType dtype, std::initializer_list<int64_t> shape);
};

}  // namespace msa::hal
