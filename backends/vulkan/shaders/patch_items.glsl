// The windows of patch_attention_3d and its backward (docs/spec.md): items of
// grid_t x grid_h x grid_w patches, windows of `window` temporal patches. The includer
// declares pc (with off_items, N, n_items, window) and items_d (int), after common.glsl.

// Grid of item it; false when a size is < 1 or the item overruns the N - first tokens left.
bool item_grid(uint it, uint first, out uint gt, out uint hw) {
  int a = items_d[pc.off_items + it * 3u];
  int bh = items_d[pc.off_items + it * 3u + 1u];
  int bw = items_d[pc.off_items + it * 3u + 2u];
  gt = 0u;
  hw = 1u;
  if (a < 1 || bh < 1 || bw < 1) return false;
  uint left = pc.N - first;
  if (uint(bh) > left / uint(bw)) return false;
  hw = uint(bh) * uint(bw);
  if (uint(a) > left / hw) return false;
  gt = uint(a);
  return true;
}

// Workgroup 0 flags ERR_ITEMS unless the items are valid and cover exactly N tokens.
void validate_items(uint gid) {
  if (gid != 0u || gl_LocalInvocationID.x != 0u) return;
  uint first = 0u;
  bool good = true;
  for (uint it = 0u; it < pc.n_items && good; ++it) {
    uint gt, hw;
    good = item_grid(it, first, gt, hw);
    first += gt * hw;
  }
  if (!good || first != pc.N) flag_error(ERR_ITEMS);
}

// The window [w_begin, w_end) of token i (empty when no valid item holds it).
void patch_window(uint i, out uint w_begin, out uint w_end) {
  uint first = 0u;
  w_begin = 0u;
  w_end = 0u;
  // Items are few: a linear walk.
  for (uint it = 0u; it < pc.n_items; ++it) {
    uint gt, hw;
    if (!item_grid(it, first, gt, hw)) break;
    uint size = gt * hw;
    if (i < first + size) {
      uint w0 = (i - first) / hw / pc.window * pc.window;  // first temporal patch of the window
      w_begin = first + w0 * hw;
      w_end = first + min(w0 + pc.window, gt) * hw;
      break;
    }
    first += size;
  }
}
