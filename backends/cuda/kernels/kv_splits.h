// How many KV splits a flash-style attention launch uses (the dense and sparse prefill
// kernels of attention/flash_prefill.cu and the wgmma dense prefill of
// dense_attention/flash_wgmma.cu; attention/choose.cpp asks): when the
// thread blocks fill the GPU fewer than twice, the count that minimises waves per unit of
// work, each split keeping at least `min_tiles` KV tiles, and the f32 partials (rows x
// splits x (D + 1)) within 512 MiB, a bound that a forced count (the flash_splits test
// hook) obeys too. Host-only and free of CUDA so that it is tested without a GPU.
#pragma once
#include <algorithm>
#include <cstdint>

namespace msa::gpu_common {

// groups: thread blocks without splitting; max_tiles: KV tiles of the longest block;
// slots: blocks resident at once on the GPU; forced > 0: that count (capped).
inline int choose_kv_splits(int64_t groups, int64_t max_tiles, int64_t rows, int D, int64_t slots, int max_splits,
                            int min_tiles, int forced) {
  int64_t cap = std::max(1, max_splits);
  while (cap > 1 && cap * rows * (D + 1) * 4 > (int64_t{512} << 20)) --cap;
  if (forced > 0) return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({forced, max_tiles, cap})));
  const int64_t smax = std::min<int64_t>(cap, max_tiles / std::max(1, min_tiles));
  slots = std::max<int64_t>(1, slots);
  if (groups <= 0 || groups >= 2 * slots || smax <= 1) return 1;
  int best = 1;
  double best_cost = static_cast<double>((groups + slots - 1) / slots);
  for (int64_t s = 2; s <= smax; ++s) {
    const double cost = static_cast<double>((groups * s + slots - 1) / slots) / s * 1.05;  // merge pass
    if (cost < best_cost) {
      best_cost = cost;
      best = static_cast<int>(s);
    }
  }
  return best;
}

}  // namespace msa::gpu_common
