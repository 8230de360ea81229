// The slab side of the training shaders' deterministic gradient sums: a workgroup owns
// one bucket of the inverse index (backends/vulkan/block_inverse.h) and walks its entries
// in row order, then each entry's tokens in order. The includer declares pc (with
// ws_rows, ws_begin, ws_entry, off_idx, max_blocks, K, Hs, sparse), ws (uint) and idx_d,
// and defines visit_token(uint e, uint c, uint t, uint n_slots): token t attends the
// first n_slots slots of logical block c through entry e.
void slab_walk(uint bucket) {
  uint w0 = ws[pc.ws_begin + bucket], w1 = ws[pc.ws_begin + bucket + 1u];
  for (uint w = w0; w < w1; ++w) {
    uint e = ws[pc.ws_entry + w];
    uint r, c;
    if (pc.sparse != 0u) {
      r = e / (pc.Hs * pc.K);
      c = uint(idx_d[pc.off_idx + e]);
    } else {
      r = e / pc.max_blocks;
      c = e % pc.max_blocks;
    }
    uint t0 = ws[pc.ws_rows + r * 4u], p0 = ws[pc.ws_rows + r * 4u + 1u];
    uint ntok = ws[pc.ws_rows + r * 4u + 2u], kvl = ws[pc.ws_rows + r * 4u + 3u];
    uint c0 = c * pc.Bs;
    // Tokens at positions >= c0 (the row's tokens are consecutive positions).
    for (uint k = c0 > p0 ? c0 - p0 : 0u; k < ntok; ++k) {
      uint pos = p0 + k;
      uint s_end = min(min(c0 + pc.Bs, kvl), pos + 1u);
      visit_token(e, c, t0 + k, s_end - c0);
    }
  }
}
