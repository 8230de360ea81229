// The page-id rule of every backend (docs/bad-inputs.md): each block_table entry of a
// sequence's blocks 0 .. nblk-1 names a page in [0, P), whether or not a kernel reads
// that block. Sparse attention reads only selected blocks, so one workgroup per sequence
// checks its row with this (the workgroup's invocations share the entries; no barriers).
// The includer declares bt_d (the block table as int) and includes common.glsl.
void check_table_row(uint row_off, uint nblk, uint P) {
  for (uint c = gl_LocalInvocationID.x; c < nblk; c += WGS) {
    int page = bt_d[row_off + c];
    if (page < 0 || uint(page) >= P) flag_error(ERR_BLOCK_TABLE);
  }
}
