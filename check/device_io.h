// Moving a case's slots to a device with guard bytes around every tensor, and back.
// Each slot gets its own buffer: [front guard][tensor][back guard]. Outputs are poisoned
// (0xFF: NaN for floats; 0x7F for i32 outputs, since 0xFF would be the valid -1).
// After a run, guards must be intact and inputs unchanged.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "check/case.h"
#include "hal/device.h"

namespace msa::cases {

inline constexpr size_t kGuardFront = 256;  // keeps the tensor 256-byte aligned
inline constexpr size_t kGuardBack = 256;

// The guard pattern byte at position i (never 0x00, 0xFF, 0x7F).
uint8_t guard_byte(size_t i);
// The poison byte for an output of dtype t.
uint8_t poison_byte(hal::DType t);

// A view of `shape` at byte `offset` of `buffer`.
hal::Tensor make_view(hal::Buffer* buffer, size_t offset, hal::DType dtype, const std::vector<int64_t>& shape);

struct DeviceSlot {
  hal::BufferPtr buffer;
  hal::Tensor tensor;           // the slot's view (absent for absent slots)
  std::vector<uint8_t> staged;  // what was uploaded, guards included (check mode)
};

// Uploads one slot. check mode (`keep_staged`): the whole buffer is staged on the host
// (guards + contents or poison) and kept to verify later. Otherwise (perf): tiled
// contents are replicated on the device and outputs poisoned with fill_bytes.
DeviceSlot upload_slot(hal::Device& dev, const Slot& s, bool keep_staged);

// Downloads the whole buffer (guards included).
std::vector<uint8_t> download_raw(hal::Device& dev, const DeviceSlot& d);

// Checks guards (every slot) and unchanged contents (inputs) of a downloaded buffer;
// returns "" or what was overwritten.
std::string verify_raw(const Slot& s, const DeviceSlot& d, const std::vector<uint8_t>& raw);

// The tensor part of a downloaded buffer as a host tensor.
hal::HostTensor payload(const Slot& s, const std::vector<uint8_t>& raw);

}  // namespace msa::cases
