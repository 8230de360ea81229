// One op call from Python: collects the tensor arguments, opens (once per process) the
// device that runs them, and gives the op hal::Tensors over the caller's memory. Memory the
// device can address is wrapped in place (CPU tensors on the CPU backends, CUDA tensors on
// msa's CUDA device of the same ordinal, on the caller's stream); CPU tensors given to a
// device that cannot address them (Vulkan, CUDA) are staged: uploaded before the op and
// downloaded after it.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hal/device.h"
#include "python/src/dlpack_view.h"

namespace msa::python {

enum class Role { in, out, inout };

class Call {
 public:
  // `backend`: a device name, or empty for the tensors' own device. `stream`: the
  // caller's native stream for CUDA tensors (0 is the legacy default stream).
  Call(std::string op, std::string backend, uint64_t stream);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // Registers one argument (None: absent) and returns its slot.
  int arg(const char* name, py::handle obj, Role role, ByteRole bytes = ByteRole::none);
  // Opens the device and makes the tensors; call once, after every arg().
  hal::Device& bind();
  // The tensor of a slot (absent for None).
  hal::Tensor tensor(int slot) const { return tensors_[static_cast<size_t>(slot)]; }
  // After the op: downloads staged outputs and raises device-side errors of a staged call.
  void finish();

 private:
  struct Arg {
    const char* name = "";  // a literal of the binding
    Role role = Role::in;
    std::optional<TensorView> view;
    std::vector<int32_t> narrowed;  // int64 index values as int32
  };
  void wrap(hal::Device& device);
  void stage(hal::Device& device);
  void narrow(Arg& a) const;
  const void* host_data(const Arg& a) const;

  std::string op_, backend_;
  uint64_t stream_ = 0;
  std::vector<Arg> args_;
  std::vector<hal::Tensor> tensors_;
  std::vector<hal::BufferPtr> buffers_;
  hal::Device* device_ = nullptr;
  bool staged_ = false;
  bool native_stream_ = false;
};

// The device named `name` ("cpu", "cuda:0", ...), opened once per process.
hal::Device& cached_device(const std::string& name);
// The device CPU tensors run on by default: cpu when compiled in and usable, else cpu-ref.
const std::string& default_host_device();
// A caller's raw CUDA stream (0: the legacy default stream) as use_native_stream takes it.
void* native_stream(uint64_t raw);
// That device, and msa's device for CUDA ordinal `ordinal`, opened once.
hal::Device& host_device();
hal::Device& cuda_device(int ordinal);

}  // namespace msa::python
