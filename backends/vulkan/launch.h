// One compute dispatch: binds the op's tensors to bindings 1, 2, ... (in call order;
// binding 0 is the error-flag buffer), pushes the op's push-constant struct and
// dispatches a linear number of workgroups (split over x and y; shaders recover the
// linear id with wg_linear() and bound it by their count).
//
// Tensor offsets: a descriptor range must start at a multiple of
// minStorageBufferOffsetAlignment, so each tensor is bound from its offset rounded down
// to that alignment and bind() returns the remaining element offset, which the kernel
// passes in its push constants. A binding larger than maxStorageBufferRange is refused;
// kernels with a buffer-device-address variant take such tensors by address instead
// (bind_address()).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/vulkan/device.h"
#include "hal/op_id.h"
#include "hal/stream.h"

namespace msa::vulkan {

class Launch {
 public:
  // `shader` is the embedded SPIR-V name; error flags go to the word of `op`.
  Launch(hal::Stream& stream, std::string shader, hal::OpId op);
  // A shader that is not an op's (the stream's copy): `where` names it in errors; it must
  // never raise the device-side error flag (it gets no word of its own).
  Launch(hal::Stream& stream, std::string shader, std::string where);

  // Binds `t` (or the dummy buffer when absent) and returns its element offset within
  // the binding, in units of its dtype (bytes for fp8). Throws msa::Error naming `what`.
  uint32_t bind(const hal::Tensor& t, const char* what);
  // Binds `bytes` bytes of an allocation from byte `offset` (a multiple of
  // minStorageBufferOffsetAlignment): temporary tables and workspace.
  void bind_raw(Allocation* a, uint64_t bytes, uint64_t offset = 0);
  // For a kernel that reads `t` through its device address: binds the dummy buffer in
  // its binding slot (so binding numbers do not change) and returns the address of the
  // view's first byte. Throws msa::Error naming `what` where the device has no buffer
  // addresses or the address is not a multiple of `align` bytes.
  uint64_t bind_address(const hal::Tensor& t, const char* what, uint64_t align);

  // Records the dispatch of `groups` workgroups (nothing when 0).
  template <typename PushConstants>
  void run(const PushConstants& pc, uint64_t groups) {
    run_raw(&pc, sizeof(PushConstants), groups);
  }

 private:
  void run_raw(const void* pc, uint32_t pc_bytes, uint64_t groups);

  VulkanStream& stream_;
  VulkanDevice& dev_;
  std::string shader_;
  std::string where_;    // the op's name (or the internal shader's) in error messages
  uint32_t error_word_;  // the op's word of the device error flags
  std::vector<VkDescriptorBufferInfo> infos_;
};

// "" when every present tensor fits one storage-buffer binding of `dev` (and 16-bit
// tensors are supported), else the reason; for the kernels' supports() predicates.
std::string check_bindable(const VulkanDevice& dev, std::initializer_list<const hal::Tensor*> ts);

// Whether `t` (present) spans more than one storage-buffer binding of `dev` allows.
bool exceeds_binding(const VulkanDevice& dev, const hal::Tensor& t);
// Whether a kernel with a buffer-device-address variant should take `ts` by address:
// one of them exceeds a binding, or the tuning knob force_bda=1 (tests of those variants on small
// tensors) on a device with addresses.
bool use_addresses(const VulkanDevice& dev, std::initializer_list<const hal::Tensor*> ts);
// "" when a kernel can access `t` through its device address, indexing it in 32-bit units
// of `unit` bytes (so at most 2^32 units; unit 0: 64-bit indices, no limit), else the
// reason, which names maxStorageBufferRange like check_bindable's.
std::string check_addressable(const VulkanDevice& dev, const hal::Tensor& t, uint64_t unit);

}  // namespace msa::vulkan
