#include "backends/cpu_ref/attended_sets.h"

#include <algorithm>
#include <string>

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
                    "block_idx[" + std::to_string(n) + "][" + std::to_string(hs) + "] lists block " +
                        std::to_string(dup == in_range.end() ? 0 : *dup) + " more than once");
    }
  }
}

}  // namespace

Batch checked_sparse_batch(const char* op, const hal::Tensor& q, const hal::Tensor& k_cache,
                           const hal::Tensor& block_table, const hal::Tensor& kv_len, const hal::Tensor& cu_q, int Qb,
                           int64_t NQ, ops::SelectionMode mode, const hal::Tensor& block_idx) {
  const int64_t T = q.dim(0), Hq = q.dim(1);
  const int64_t P = k_cache.dim(0), Hkv = k_cache.dim(1), Bs = k_cache.dim(2);
  MSA_CHECK_ARG(Hkv > 0 && Hq % Hkv == 0, op, "k_cache",
                "Hkv = " + std::to_string(Hkv) + " must divide Hq = " + std::to_string(Hq));
  const bool shared = mode == ops::SelectionMode::shared;
  const int64_t Hs = block_idx.dim(1);
  MSA_CHECK_ARG(Hs == (shared ? 1 : Hkv), op, "block_idx",
                std::string("selection heads must be ") + (shared ? "1 (shared)" : "Hkv (per_kv_head)") + ", got " +
                    std::to_string(Hs));
  Batch batch = make_batch(op, cu_q, kv_len, T, Bs, block_table.dim(1), Qb);
  check_nq(op, batch, NQ);
  MSA_CHECK_ARG(block_idx.dim(0) == batch.nq(), op, "block_idx",
                "must have NQ = " + std::to_string(batch.nq()) + " rows");
  check_block_table(op, batch, block_table, P);
  check_block_idx(op, batch, block_idx);
  return batch;
}

void selected_blocks(const Batch& batch, const hal::Tensor& block_idx, int64_t n, int64_t hs, int64_t Bs,
                     std::vector<int64_t>& blocks) {
  const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
  const Sequence& s = batch.seqs[static_cast<size_t>(qb.seq)];
  const int64_t K = block_idx.dim(2);
  const int32_t* sel = block_idx.data<const int32_t>() + (n * block_idx.dim(1) + hs) * K;
  blocks.clear();
  for (int64_t j = 0; j < K; ++j) {
    const int64_t c = sel[j];
    if (c < 0 || c >= s.n_blocks || c * Bs > qb.p1) continue;  // contributes nothing
    blocks.push_back(c);
  }
}

Batch checked_dense_batch(const char* op, const hal::Tensor& q, const hal::Tensor& k_cache,
                          const hal::Tensor& block_table, const hal::Tensor& kv_len, const hal::Tensor& cu_q) {
  const int64_t Hq = q.dim(1), Hkv = k_cache.dim(1);
  MSA_CHECK_ARG(Hkv > 0 && Hq % Hkv == 0, op, "k_cache",
                "Hkv = " + std::to_string(Hkv) + " must divide Hq = " + std::to_string(Hq));
  Batch batch = make_batch(op, cu_q, kv_len, q.dim(0), k_cache.dim(2), block_table.dim(1), 1);
  check_block_table(op, batch, block_table, k_cache.dim(0));
  return batch;
}

void for_each_dense_set(const Batch& batch, const hal::Tensor& k_cache, const hal::Tensor& v_cache,
                        const hal::Tensor& block_table, const AttendFn& fn) {
  KvRows kv;
  kv.D = k_cache.dim(3);
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const Sequence& s = batch.seqs[b];
    if (s.q_len == 0) continue;
    for (int64_t g = 0; g < k_cache.dim(1); ++g) {
      // The whole valid sequence of KV head g; each query masks it causally.
      kv.clear();
      for (int64_t c = 0; c < s.n_blocks; ++c)
        kv.append_block(k_cache, v_cache, page_of(block_table, static_cast<int64_t>(b), c), g, c, s.kv_len);
      for (int64_t i = 0; i < s.q_len; ++i) fn(kv, s.q_begin + i, g, s.pos0 + i);
    }
  }
}

void for_each_sparse_set(const Batch& batch, const hal::Tensor& k_cache, const hal::Tensor& v_cache,
                         const hal::Tensor& block_table, const hal::Tensor& block_idx, ops::SelectionMode mode,
                         const AttendFn& fn) {
  const bool shared = mode == ops::SelectionMode::shared;
  KvRows kv;
  kv.D = k_cache.dim(3);
  std::vector<int64_t> blocks;
  for (int64_t n = 0; n < batch.nq(); ++n) {
    const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const Sequence& s = batch.seqs[static_cast<size_t>(qb.seq)];
    for (int64_t g = 0; g < k_cache.dim(1); ++g) {
      selected_blocks(batch, block_idx, n, shared ? 0 : g, k_cache.dim(2), blocks);
      kv.clear();
      for (const int64_t c : blocks) kv.append_block(k_cache, v_cache, page_of(block_table, qb.seq, c), g, c, s.kv_len);
      for (int64_t t = qb.t_begin; t < qb.t_end; ++t) fn(kv, t, g, s.pos0 + (t - s.q_begin));
    }
  }
}

}  // namespace msa::cpu_ref
