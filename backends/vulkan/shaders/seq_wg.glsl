// Cooperative batch lookup for decode-first kernels: each invocation reads one
// sequence's cu_q / kv_len entries (all in one round trip instead of a serial walk over
// the batch), and a workgroup scan of the sequences' query-block counts gives each one
// its first query block. Same results as seq_qblock() / seq_find() + seq_qb_start() of
// seq.glsl on consistent data; on inconsistent data (flagged by seq_validate) the
// smallest matching sequence wins, so the result stays deterministic and in bounds.
// Call from uniform control flow (contains barriers). Include after seq.glsl.
// wg_seq_validate() is seq_validate() spread over the workgroup (one round trip instead of
// B dependent ones in a single invocation): the same flags and the same result.
shared uint sh_lk_b;     // the sequence found (INVALID: none)
shared uint sh_lk_qb0;   // its first query block
shared int sh_lk_s[4];   // its q0, qlen, kvl, pos0

struct SeqLookup {
  bool found;
  uint b;
  uint qb0;   // global index of its first query block
  SeqInfo s;
};

// by_token: find the sequence holding packed token `key`; else the one holding query
// block `key` (blocks of Qb positions, numbered over the valid sequences in order).
SeqLookup wg_seq_lookup(uint key, bool by_token, uint maxkv, uint Qb) {
  uint tid = gl_LocalInvocationID.x;
  if (tid == 0u) sh_lk_b = INVALID;
  uint my_b = INVALID, my_qb0 = 0u;
  SeqInfo my_s;
  uint carry = 0u;
  for (uint b0 = 0u; b0 < SEQ_B; b0 += WGS) {  // uniform
    uint b = b0 + tid;
    uint nb = 0u;
    SeqInfo s;
    s.ok = false;
    if (b < SEQ_B) {
      s = seq_info(b, maxkv);
      if (s.ok) nb = seq_num_qblocks(s.qlen, s.kvl, Qb);
    }
    uint total;
    uint start = carry + wg_exclusive_scan(nb, total);  // barriers: sh_lk_b reset is visible
    bool hit = by_token ? (s.ok && int(key) >= s.q0 && int(key) < s.q0 + s.qlen)
                        : (nb > 0u && key >= start && key - start < nb);
    if (hit && my_b == INVALID) {
      my_b = b;
      my_qb0 = start;
      my_s = s;
      atomicMin(sh_lk_b, b);
    }
    carry += total;
  }
  barrier();
  if (my_b != INVALID && my_b == sh_lk_b) {
    sh_lk_qb0 = my_qb0;
    sh_lk_s[0] = my_s.q0;
    sh_lk_s[1] = my_s.qlen;
    sh_lk_s[2] = my_s.kvl;
    sh_lk_s[3] = my_s.pos0;
  }
  barrier();
  SeqLookup r;
  r.b = sh_lk_b;
  r.found = r.b != INVALID;
  r.qb0 = r.found ? sh_lk_qb0 : 0u;
  r.s.q0 = r.found ? sh_lk_s[0] : 0;
  r.s.qlen = r.found ? sh_lk_s[1] : 0;
  r.s.kvl = r.found ? sh_lk_s[2] : 0;
  r.s.pos0 = r.found ? sh_lk_s[3] : 0;
  r.s.ok = r.found;
  barrier();  // the shared results may be overwritten by a later lookup
  return r;
}

// seq_validate() by the whole workgroup: each invocation checks sequences tid, tid + WGS,
// ...; the flags are OR-ed (the error word is an OR of bits, so the result is the same)
// and the query-block counts summed. Uniform control flow (barriers); returns the count
// in every invocation.
uint wg_seq_validate(uint maxkv, uint Qb, bool check_t) {
  uint tid = gl_LocalInvocationID.x;
  uint bits = 0u, nq = 0u;
  if (tid == 0u) {
    if (CU_Q(0u) != 0) bits |= ERR_CU_Q;
    if (check_t && CU_Q(SEQ_B) != int(SEQ_T)) bits |= ERR_CU_Q;
  }
  for (uint b = tid; b < SEQ_B; b += WGS) {
    int c0 = CU_Q(b), c1 = CU_Q(b + 1u), kvl = KV_LEN(b);
    if (c1 < c0) bits |= ERR_CU_Q;
    else if (kvl < c1 - c0 || uint(kvl) > maxkv) bits |= ERR_KV_LEN;
    else nq += seq_num_qblocks(c1 - c0, kvl, Qb);
  }
  bits = subgroupOr(bits);
  if (subgroupElect() && bits != 0u) flag_error(bits);
  return wg_sum_u(nq);
}
