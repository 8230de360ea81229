// sparse_block_attention: softmax attention over the causal, valid tokens of the KV blocks
// selected per query block and selection head (docs/spec.md, "Op: sparse_block_attention").
// Scalar, one thread, double accumulation.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {
namespace {

// Entries outside [0, n_blocks) contribute nothing (-1 is the normal padding). Entries
// inside must be distinct: the contract leaves duplicates unspecified and the reference
// rejects them, so a backend can never be "checked" against a double-counted block.
void check_block_idx(const char* op, const Batch& batch, const hal::Tensor& block_idx) {
  const int64_t Hs = block_idx.dim(1), K = block_idx.dim(2);
  const int32_t* bi = block_idx.data<const int32_t>();
  std::vector<int32_t> in_range;
  for (int64_t n = 0; n < batch.nq(); ++n) {
    const Sequence& s = batch.seqs[static_cast<size_t>(batch.qblocks[static_cast<size_t>(n)].seq)];
    for (int64_t hs = 0; hs < Hs; ++hs) {
      const int32_t* row = bi + (n * Hs + hs) * K;
      in_range.clear();
      for (int64_t j = 0; j < K; ++j)
        if (row[j] >= 0 && row[j] < s.n_blocks) in_range.push_back(row[j]);
      std::sort(in_range.begin(), in_range.end());
      const auto dup = std::adjacent_find(in_range.begin(), in_range.end());
      MSA_CHECK_ARG(dup == in_range.end(), op, "block_idx",
                    "block_idx[" + std::to_string(n) + "][" + std::to_string(hs) +
                        "] lists block " + std::to_string(dup == in_range.end() ? 0 : *dup) +
                        " more than once");
    }
  }
}

}  // namespace

void sparse_block_attention(hal::Stream&, const ops::SparseAttentionArgs& a) {
  const char* op = "sparse_block_attention";
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1), Bs = a.k_cache.dim(2);
  MSA_CHECK_ARG(Hkv > 0 && Hq % Hkv == 0, op, "k_cache",
                "Hkv = " + std::to_string(Hkv) + " must divide Hq = " + std::to_string(Hq));
  const int64_t G = Hq / Hkv;
  const bool shared = a.mode == ops::SelectionMode::shared;
  const int64_t Hs = a.block_idx.dim(1), K = a.block_idx.dim(2);
  MSA_CHECK_ARG(Hs == (shared ? 1 : Hkv), op, "block_idx",
                std::string("selection heads must be ") + (shared ? "1 (shared)" : "Hkv (per_kv_head)") +
                    ", got " + std::to_string(Hs));
  const Batch batch = make_batch(op, a.cu_q, a.kv_len, T, Bs, a.block_table.dim(1), a.Qb);
  check_nq(op, batch, a.NQ);
  MSA_CHECK_ARG(a.block_idx.dim(0) == batch.nq(), op, "block_idx",
                "must have NQ = " + std::to_string(batch.nq()) + " rows");
  check_block_table(op, batch, a.block_table, P);
  check_block_idx(op, batch, a.block_idx);
  const double scale = resolve_scale(a.scale, D);
  const int32_t* bi = a.block_idx.data<const int32_t>();

  KvRows kv;
  kv.D = D;
  AttendScratch ws;
  for (int64_t n = 0; n < batch.nq(); ++n) {
    const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const Sequence& s = batch.seqs[static_cast<size_t>(qb.seq)];
    for (int64_t g = 0; g < Hkv; ++g) {
      // Shared mode: one selection, but K/V still come from each query head's KV head.
      const int32_t* sel = bi + (n * Hs + (shared ? 0 : g)) * K;
      kv.clear();
      for (int64_t j = 0; j < K; ++j) {
        const int64_t c = sel[j];
        if (c < 0 || c >= s.n_blocks || c * Bs > qb.p1) continue;  // contributes nothing
        kv.append_block(a.k_cache, a.v_cache, page_of(a.block_table, qb.seq, c), g, c, s.kv_len);
      }
      for (int64_t t = qb.t_begin; t < qb.t_end; ++t)
        attend_heads(a.q, t, g * G, G, kv, s.pos0 + (t - s.q_begin), scale, a.out, a.lse, ws);
    }
  }
}

}  // namespace msa::cpu_ref
