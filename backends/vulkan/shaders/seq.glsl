// Varlen batch bookkeeping from cu_q [B+1] and kv_len [B] (docs/spec.md, "Sequences").
// The includer defines CU_Q(i) and KV_LEN(i) (int reads with the element offsets
// applied), SEQ_B (B) and SEQ_T (T). These values are untrusted device data: every
// helper stays in bounds on any input, and seq_validate() flags what is inconsistent.

// Query blocks (of Qb positions) of a sequence whose qlen queries end at kv_len kvl.
uint seq_num_qblocks(int qlen, int kvl, uint Qb) {
  if (qlen <= 0) return 0u;
  return uint((kvl - 1) / int(Qb) - (kvl - qlen) / int(Qb) + 1);
}

struct SeqInfo {
  int q0;     // first packed token (cu_q[b])
  int qlen;   // query tokens
  int kvl;    // kv_len[b]
  int pos0;   // position of the first query
  bool ok;    // consistent entry (0 <= q0 <= q0+qlen <= T, qlen <= kvl <= maxkv)
};

SeqInfo seq_info(uint b, uint maxkv) {
  SeqInfo s;
  s.q0 = CU_Q(b);
  int c1 = CU_Q(b + 1u);
  s.qlen = c1 - s.q0;
  s.kvl = KV_LEN(b);
  s.pos0 = s.kvl - s.qlen;
  s.ok = s.q0 >= 0 && s.qlen >= 0 && c1 <= int(SEQ_T) && s.kvl >= s.qlen && uint(s.kvl) <= maxkv;
  return s;
}

// Largest b in [0, B) with cu_q[b] <= t: the sequence of packed token t (binary search,
// which terminates on any data; the caller checks the result with seq_info). B > 0.
uint seq_find(uint t) {
  uint lo = 0u, hi = SEQ_B;
  while (hi - lo > 1u) {
    uint mid = (lo + hi) / 2u;
    if (CU_Q(mid) <= int(t)) lo = mid; else hi = mid;
  }
  return lo;
}

// Checks all of cu_q and kv_len (one thread) and flags ERR_CU_Q / ERR_KV_LEN; returns
// the number of query blocks of the valid sequences. check_t: compare cu_q[B] with T.
uint seq_validate(uint maxkv, uint Qb, bool check_t) {
  uint bits = 0u;
  if (CU_Q(0u) != 0) bits |= ERR_CU_Q;
  if (check_t && CU_Q(SEQ_B) != int(SEQ_T)) bits |= ERR_CU_Q;
  uint nq = 0u;
  for (uint b = 0u; b < SEQ_B; ++b) {
    int c0 = CU_Q(b), c1 = CU_Q(b + 1u), kvl = KV_LEN(b);
    if (c1 < c0) { bits |= ERR_CU_Q; continue; }
    if (kvl < c1 - c0 || uint(kvl) > maxkv) { bits |= ERR_KV_LEN; continue; }
    nq += seq_num_qblocks(c1 - c0, kvl, Qb);
  }
  if (bits != 0u) flag_error(bits);
  return nq;
}

// Global index of the first query block of sequence b.
uint seq_qb_start(uint b, uint maxkv, uint Qb) {
  uint n = 0u;
  for (uint i = 0u; i < b; ++i) {
    SeqInfo s = seq_info(i, maxkv);
    if (s.ok) n += seq_num_qblocks(s.qlen, s.kvl, Qb);
  }
  return n;
}

// The sequence and positions [p0, p1] of query block n; false when n is past the end.
bool seq_qblock(uint n, uint maxkv, uint Qb, out uint b_out, out SeqInfo s_out, out int p0,
                out int p1) {
  uint acc = 0u;
  for (uint b = 0u; b < SEQ_B; ++b) {
    SeqInfo s = seq_info(b, maxkv);
    if (!s.ok) continue;
    uint nb = seq_num_qblocks(s.qlen, s.kvl, Qb);
    if (n < acc + nb) {
      int blk = s.pos0 / int(Qb) + int(n - acc);
      p0 = max(s.pos0, blk * int(Qb));
      p1 = min(s.pos0 + s.qlen - 1, blk * int(Qb) + int(Qb) - 1);
      b_out = b;
      s_out = s;
      return true;
    }
    acc += nb;
  }
  b_out = 0u;
  s_out.q0 = 0;
  s_out.qlen = 0;
  s_out.kvl = 0;
  s_out.pos0 = 0;
  s_out.ok = false;
  p0 = 0;
  p1 = -1;
  return false;
}
