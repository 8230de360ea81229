#include "backends/cpu_ref/patch_windows.h"

#include <algorithm>
#include <string>

#include "hal/error.h"

namespace msa::cpu_ref {

std::vector<PatchWindow> checked_windows(const char* op, const hal::Tensor& items, int window, int64_t N) {
  MSA_CHECK_ARG(window >= 1, op, "window", "must be >= 1, got " + std::to_string(window));
  const int64_t n_items = items.present() ? items.dim(0) : 0;
  const int32_t* it = n_items > 0 ? items.data<const int32_t>() : nullptr;
  std::vector<int64_t> first(static_cast<size_t>(n_items) + 1, 0);
  for (int64_t i = 0; i < n_items; ++i) {
    const int64_t gt = it[i * 3], gh = it[i * 3 + 1], gw = it[i * 3 + 2];
    const std::string at = "items[" + std::to_string(i) + "]";
    MSA_CHECK_ARG(gt >= 1 && gh >= 1 && gw >= 1, op, "items",
                  at + " = {" + std::to_string(gt) + ", " + std::to_string(gh) + ", " + std::to_string(gw) +
                      "} has a grid dimension < 1");
    // Each factor is < 2^31, so gh * gw fits; bound before the third multiply.
    const int64_t hw = gh * gw;
    const int64_t left = N - first[static_cast<size_t>(i)];
    MSA_CHECK_ARG(gt <= left / hw, op, "items", at + " needs more tokens than the " + std::to_string(N) + " in q");
    first[static_cast<size_t>(i) + 1] = first[static_cast<size_t>(i)] + gt * hw;
  }
  MSA_CHECK_ARG(first.back() == N, op, "items",
                "describe " + std::to_string(first.back()) + " tokens but q has " + std::to_string(N));
  std::vector<PatchWindow> windows;
  for (int64_t i = 0; i < n_items; ++i) {
    const int64_t gt = it[i * 3], hw = int64_t{it[i * 3 + 1]} * it[i * 3 + 2];
    for (int64_t w0 = 0; w0 < gt; w0 += window)
      windows.push_back(
          {first[static_cast<size_t>(i)] + w0 * hw, first[static_cast<size_t>(i)] + std::min(gt, w0 + window) * hw});
  }
  return windows;
}

}  // namespace msa::cpu_ref
