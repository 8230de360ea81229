#include "backends/cpu/scratch.h"

#include <array>

#include "hwy/aligned_allocator.h"

namespace msa::cpu {

float* scratch_floats(int slot, size_t n) {
  struct Slots {
    std::array<hwy::AlignedFreeUniquePtr<float[]>, kScratchSlots> buf;
    std::array<size_t, kScratchSlots> size{};
  };
  thread_local Slots t;
  if (t.size[slot] < n || !t.buf[slot]) {
    const size_t grow = n + n / 4 + 64;
    t.buf[slot] = hwy::AllocateAligned<float>(grow);
    t.size[slot] = grow;
  }
  return t.buf[slot].get();
}

}  // namespace msa::cpu
