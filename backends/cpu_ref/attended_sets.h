// The token sets the attention ops attend, shared by the forward ops, their backward and
// indexer_kl: eager validation of a dense or sparse call's batch (and block_idx), the
// blocks a query block selects, and visits of every query's K/V rows.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "hal/tensor.h"
#include "ops/args.h"

namespace msa::cpu_ref {

// Validates a sparse call before any work: Hkv divides Hq (heads of q), block_idx has Hs =
// 1 (shared) or Hkv rows, the batch, NQ, the pages and block_idx (entries in range are
// distinct). Returns the batch numbered with query blocks of size Qb.
Batch checked_sparse_batch(const char* op, const hal::Tensor& q, const hal::Tensor& k_cache,
                           const hal::Tensor& block_table, const hal::Tensor& kv_len, const hal::Tensor& cu_q, int Qb,
                           int64_t NQ, ops::SelectionMode mode, const hal::Tensor& block_idx);

// The logical blocks query block n attends for selection head hs: the entries of
// block_idx[n][hs] inside [0, n_blocks) that start at or before the block's last position.
void selected_blocks(const Batch& batch, const hal::Tensor& block_idx, int64_t n, int64_t hs, int64_t Bs,
                     std::vector<int64_t>& blocks);

// Validates a dense call before any work: Hkv divides Hq, the batch and the pages.
Batch checked_dense_batch(const char* op, const hal::Tensor& q, const hal::Tensor& k_cache,
                          const hal::Tensor& block_table, const hal::Tensor& kv_len, const hal::Tensor& cu_q);

// Called with the K/V rows of KV head g that the query heads g*G .. g*G+G-1 of token t
// attend: the rows with pos <= limit.
using AttendFn = std::function<void(const KvRows& kv, int64_t t, int64_t g, int64_t limit)>;

// Every query token and KV head of a dense call: all valid tokens of the sequence.
void for_each_dense_set(const Batch& batch, const hal::Tensor& k_cache, const hal::Tensor& v_cache,
                        const hal::Tensor& block_table, const AttendFn& fn);

// Every query token and KV head of a sparse call: the selected blocks (selection head g,
// or 0 in shared mode, where the rows still come from each query head's KV head).
void for_each_sparse_set(const Batch& batch, const hal::Tensor& k_cache, const hal::Tensor& v_cache,
                         const hal::Tensor& block_table, const hal::Tensor& block_idx, ops::SelectionMode mode,
                         const AttendFn& fn);

}  // namespace msa::cpu_ref
