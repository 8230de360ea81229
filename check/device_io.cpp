#include "check/device_io.h"

#include <algorithm>
#include <cstring>

#include "hal/error.h"

namespace msa::cases {

uint8_t guard_byte(size_t i) {
  const uint8_t b = static_cast<uint8_t>(0x5B + 37 * i);
  return (b == 0x00 || b == 0xFF || b == 0x7F) ? 0xA5 : b;
}

uint8_t poison_byte(hal::DType t) { return t == hal::DType::i32 ? 0x7F : 0xFF; }

hal::Tensor make_view(hal::Buffer* buffer, size_t offset, hal::DType dtype, const std::vector<int64_t>& shape) {
  if (shape.size() > static_cast<size_t>(hal::kMaxRank)) throw Error("cases: tensor rank above kMaxRank");
  hal::Tensor t;
  t.buffer = buffer;
  t.offset = offset;
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

namespace {

hal::Tensor byte_view(hal::Buffer* b, size_t offset, size_t n) {
  return make_view(b, offset, hal::DType::fp8_e4m3, {static_cast<int64_t>(n)});
}

// Fills [off+tile, off+n) of the buffer by doubling copies of its first `tile` bytes.
void replicate(hal::Device& dev, hal::Buffer* b, size_t off, size_t tile, size_t n) {
  size_t have = tile;
  while (have < n) {
    const size_t m = std::min(have, n - have);
    dev.stream().copy(byte_view(b, off + have, m), byte_view(b, off, m));
    have += m;
  }
}

}  // namespace

DeviceSlot upload_slot(hal::Device& dev, const Slot& s, bool keep_staged) {
  DeviceSlot d;
  if (s.absent) return d;
  const size_t n = s.nbytes();
  const size_t total = kGuardFront + n + kGuardBack;
  d.buffer = dev.alloc(total);
  d.tensor = make_view(d.buffer.get(), kGuardFront, s.dtype, s.shape);
  const bool has_contents = s.role != Role::out;
  if (has_contents && !s.tiled && s.host.nbytes() != n)
    throw Error("cases: slot '" + s.name + "' holds " + std::to_string(s.host.nbytes()) + " bytes, expected " +
                std::to_string(n));
  if (keep_staged) {
    if (s.tiled) throw Error("cases: slot '" + s.name + "' is tiled in check mode");
    d.staged.resize(total);
    for (size_t i = 0; i < kGuardFront; ++i) d.staged[i] = guard_byte(i);
    for (size_t i = 0; i < kGuardBack; ++i) d.staged[kGuardFront + n + i] = guard_byte(kGuardFront + n + i);
    if (has_contents) {
      if (n) std::memcpy(d.staged.data() + kGuardFront, s.host.bytes.data(), n);
    } else {
      std::memset(d.staged.data() + kGuardFront, poison_byte(s.dtype), n);
    }
    dev.stream().upload(byte_view(d.buffer.get(), 0, total), d.staged.data());
    return d;
  }
  if (n == 0) return d;
  if (!has_contents) {
    dev.stream().fill_bytes(byte_view(d.buffer.get(), kGuardFront, n), poison_byte(s.dtype));
  } else if (s.tiled) {
    const size_t tile = std::min(s.host.nbytes(), n);
    if (tile == 0) throw Error("cases: slot '" + s.name + "' has an empty tile");
    dev.stream().upload(byte_view(d.buffer.get(), kGuardFront, tile), s.host.bytes.data());
    replicate(dev, d.buffer.get(), kGuardFront, tile, n);
  } else {
    dev.stream().upload(byte_view(d.buffer.get(), kGuardFront, n), s.host.bytes.data());
  }
  return d;
}

std::vector<uint8_t> download_raw(hal::Device& dev, const DeviceSlot& d) {
  std::vector<uint8_t> raw;
  if (!d.buffer) return raw;
  raw.resize(d.buffer->bytes());
  dev.stream().download(raw.data(), byte_view(d.buffer.get(), 0, raw.size()));
  return raw;
}

std::string verify_raw(const Slot& s, const DeviceSlot& d, const std::vector<uint8_t>& raw) {
  if (!d.buffer) return "";
  const size_t n = s.nbytes();
  for (size_t i = 0; i < kGuardFront; ++i)
    if (raw[i] != d.staged[i])
      return s.name + ": guard byte " + std::to_string(kGuardFront - i) + " before the tensor overwritten";
  for (size_t i = kGuardFront + n; i < raw.size(); ++i)
    if (raw[i] != d.staged[i])
      return s.name + ": guard byte " + std::to_string(i - kGuardFront - n) + " after the tensor overwritten";
  if (s.role == Role::in) {
    for (size_t i = kGuardFront; i < kGuardFront + n; ++i)
      if (raw[i] != d.staged[i]) return s.name + ": input modified at byte " + std::to_string(i - kGuardFront);
  }
  return "";
}

hal::HostTensor payload(const Slot& s, const std::vector<uint8_t>& raw) {
  hal::HostTensor t(s.dtype, s.shape);
  if (t.nbytes()) std::memcpy(t.bytes.data(), raw.data() + kGuardFront, t.nbytes());
  return t;
}

}  // namespace msa::cases
