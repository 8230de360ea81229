// The attention windows of patch_attention_3d and its backward: items are packed one
// after another, each cut into windows of `window` temporal patches (grid_h * grid_w
// tokens each); every token attends to exactly the tokens of its window.
#pragma once
#include <cstdint>
#include <vector>

#include "hal/tensor.h"

namespace msa::cpu_ref {

// Tokens [t_begin, t_end) of one window.
struct PatchWindow {
  int64_t t_begin = 0, t_end = 0;
};

// Validates window >= 1 and every item of items [n][3] (grids >= 1, N tokens in all)
// before any work, then lists the windows in token order. Throws msa::Error naming
// "window" or "items".
std::vector<PatchWindow> checked_windows(const char* op, const hal::Tensor& items, int window, int64_t N);

}  // namespace msa::cpu_ref
