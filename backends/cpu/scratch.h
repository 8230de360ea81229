// Per-thread scratch memory for the kernels: a few 64-byte aligned float buffers per
// worker thread, grown on demand and reused across calls (no allocation per task).
#pragma once
#include <cstddef>

namespace msa::cpu {

inline constexpr int kScratchSlots = 8;

// Buffer `slot` (0 <= slot < kScratchSlots) of the calling thread with room for at least
// n floats. The pointer stays valid until the next call with the same slot on this thread.
float* scratch_floats(int slot, size_t n);

}  // namespace msa::cpu
