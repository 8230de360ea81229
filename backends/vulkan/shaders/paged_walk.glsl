// The attended set of one packed token under one selection, exactly as the forward
// shaders (paged_attention.comp): stage sparse the block_idx entries of its query block that
// lie in its sequence and start at or before its position, stage dense every block up to
// its position; each block's tokens end at min(block end, position + 1). Shared by the
// per-row passes of the training shaders, which validate as the forward does: workgroup
// 0 checks cu_q / kv_len (and NQ for sparse) and one workgroup per sequence checks its
// block_table row; a page id out of range is also flagged and skipped where it is read.
//
// The includer declares pc (with off_bt, off_idx, P, Bs, max_blocks, Qb, NQ, K, Hs,
// sparse), bt_d and idx_d (int), includes common.glsl, seq.glsl and table_check.glsl, and
// defines visit_block(uint pass, uint page, uint c, uint s_end) before including this.

// The page of logical block c of sequence b, or INVALID (flagged) when out of range.
uint walk_page_of(uint b, uint c) {
  int page = bt_d[pc.off_bt + b * pc.max_blocks + c];
  if (page < 0 || uint(page) >= pc.P) {
    if (gl_LocalInvocationID.x == 0u) flag_error(ERR_BLOCK_TABLE);
    return INVALID;
  }
  return uint(page);
}

// Workgroup 0's checks of the batch (call once per workgroup with its linear id).
void walk_validate(uint gid) {
  if (gid != 0u || gl_LocalInvocationID.x != 0u) return;
  uint nq = seq_validate(pc.max_blocks * pc.Bs, pc.sparse != 0u ? pc.Qb : 1u, true);
  if (pc.sparse != 0u && nq != pc.NQ) flag_error(ERR_NQ);
}

// Checks the block_table row of token t's sequence when t is its first token (call from
// one workgroup per token, whatever the token attends: the same errors as the forward).
void walk_check_row(uint t) {
  if (pc.B == 0u) return;
  uint b = seq_find(t);
  SeqInfo s = seq_info(b, pc.max_blocks * pc.Bs);
  if (s.ok && int(t) == s.q0 && s.qlen > 0)
    check_table_row(pc.off_bt + b * pc.max_blocks, (uint(s.kvl) + pc.Bs - 1u) / pc.Bs, pc.P);
}

// Visits the blocks of token t under selection head sel (< Hs) in pass `pass`. Uniform
// control flow (visit_block may hold barriers).
void walk_attended(uint pass, uint t, uint sel) {
  if (pc.B == 0u) return;
  uint maxkv = pc.max_blocks * pc.Bs;
  uint b = seq_find(t);
  SeqInfo s = seq_info(b, maxkv);
  if (!s.ok || int(t) < s.q0 || int(t) >= s.q0 + s.qlen) return;
  uint pos = uint(s.pos0 + (int(t) - s.q0));
  uint s_lim = pos + 1u;
  if (pc.sparse != 0u) {
    uint nblk = (uint(s.kvl) + pc.Bs - 1u) / pc.Bs;
    uint qb = seq_qb_start(b, maxkv, pc.Qb) + pos / pc.Qb - uint(s.pos0) / pc.Qb;
    if (qb >= pc.NQ) return;
    uint row = pc.off_idx + (qb * pc.Hs + (pc.Hs == 1u ? 0u : sel)) * pc.K;
    for (uint i = 0u; i < pc.K; ++i) {
      int c = idx_d[row + i];
      // Padding (-1) and entries outside the sequence contribute nothing.
      if (c < 0 || uint(c) >= nblk || uint(c) * pc.Bs > pos) continue;
      uint page = walk_page_of(b, uint(c));
      if (page != INVALID) visit_block(pass, page, uint(c), min(uint(c) * pc.Bs + pc.Bs, s_lim));
    }
  } else {
    for (uint c = 0u; c * pc.Bs < s_lim; ++c) {
      uint page = walk_page_of(b, c);
      if (page != INVALID) visit_block(pass, page, c, min(c * pc.Bs + pc.Bs, s_lim));
    }
  }
}
