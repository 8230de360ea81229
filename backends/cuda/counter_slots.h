// Counter slots: small indices into per-stream device state that kernels keep in static
// __device__ tables (arrival counters that concurrent launches must not share). A
// __device__ table exists once per device, so slots are handed out per device: the streams
// of device 1 do not use up the slots device 0's kernels index. Lowest free slot first, so
// the first streams of a device get the tables' (few, e.g. 8) entries. Header-only and
// free of CUDA so that it is tested without a GPU.
#pragma once
#include <array>
#include <map>
#include <mutex>

namespace msa::gpu_common {

template <int kSlots>
class CounterSlotPool {
 public:
  // The lowest free slot of `device`, or -1 when all kSlots are taken.
  int acquire(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& used = used_[device];
    for (int i = 0; i < kSlots; ++i)
      if (!used[i]) {
        used[i] = true;
        return i;
      }
    return -1;
  }
  // Gives `slot` of `device` back; -1 (none was taken) is ignored.
  void release(int device, int slot) {
    if (slot < 0 || slot >= kSlots) return;
    std::lock_guard<std::mutex> lock(mu_);
    used_[device][slot] = false;
  }

 private:
  std::mutex mu_;
  std::map<int, std::array<bool, kSlots>> used_;  // value-initialised: all free
};

}  // namespace msa::gpu_common
