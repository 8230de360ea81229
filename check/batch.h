// Input builders shared by the attention cases: varlen batches, query blocks, paged
// block-major caches with shuffled pages and NaN slack slots, random tensors, and
// realistic block selections.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "check/rng.h"
#include "hal/host_tensor.h"

namespace msa::cases {

// One query block: tokens [t0, t1) of sequence b, positions [p0, p1].
struct QueryBlock {
  int b;
  int64_t t0, t1, p0, p1;
};

// A varlen batch: query and cache lengths per sequence and the query blocks of `Qb`.
struct Batch {
  std::vector<int32_t> q_len, kv_len, cu_q;
  int Qb = 1;
  std::vector<QueryBlock> qblocks;
  std::vector<int32_t> token_seq;  // sequence of each packed token
  std::vector<int64_t> token_pos;  // position of each packed token

  Batch(std::vector<int32_t> q_len, std::vector<int32_t> kv_len, int Qb);
  int B() const { return static_cast<int>(q_len.size()); }
  int64_t T() const { return cu_q.empty() ? 0 : cu_q.back(); }
  int64_t NQ() const { return static_cast<int64_t>(qblocks.size()); }
  // ceil(kv_len[b] / Bs)
  int64_t blocks_of(int b, int Bs) const { return (kv_len[static_cast<size_t>(b)] + Bs - 1) / Bs; }
  // "q=[1,16] kv=[100,37]" (summarised for large B)
  std::string lens() const;
  hal::HostTensor cu_q_tensor() const;
  hal::HostTensor kv_len_tensor() const;
};

// The page assignment of a paged cache: block_table[B][max_blocks], P pages.
struct Pages {
  int Bs = 0;
  int64_t max_blocks = 0, P = 0;
  std::vector<int32_t> table;        // B * max_blocks; unread entries are -1
  std::vector<int32_t> seq_of_page;  // -1 for spare pages
  std::vector<int64_t> block_of_page;
  hal::HostTensor table_tensor(int B) const;
  // The first slot of page p at or past its sequence's kv_len (0 for a spare page, Bs
  // for a full one): the slots from here on are slack, which no output may see.
  int64_t first_slack(const Batch& batch, int64_t p) const;
};

// Pages for every block of every sequence in shuffled order (or in order), plus
// `spare` pages no sequence uses (filled with NaN), and `extra_cols` unread columns.
Pages make_pages(const Batch& batch, int Bs, Rng& rng, bool shuffle, int spare = 2, int extra_cols = 1);

// A random tensor: normal * sigma rounded to `dtype` (never zero-filled).
hal::HostTensor random_tensor(hal::DType dtype, std::vector<int64_t> shape, Rng& rng, double sigma = 1.0);
// As random_tensor, but for perf inputs: when larger than `max_tile` bytes, only a random
// tile of about `max_tile` bytes (a multiple of the last dim) is generated; `tiled` says so.
hal::HostTensor random_tile(hal::DType dtype, const std::vector<int64_t>& shape, Rng& rng, double sigma,
                            size_t max_tile, bool& tiled);

// A paged cache [P][heads][Bs][D] (heads = 0 for the indexer layout [P][Bs][D]):
// random values; in check mode every slot at or past kv_len and every spare page is NaN.
// In perf mode it may be tiled (see random_tile).
hal::HostTensor make_cache(const Batch& batch, const Pages& pages, int heads, int D, hal::DType dtype, Rng& rng,
                           double sigma, bool perf, bool& tiled);

// Random block selections [NQ][Hs][k] (ascending, -1 padded): for each query block
// with last position p1, min(k, floor(p1/Bs)+1) distinct valid blocks, always including
// the local one; sometimes one fewer (padding). `correlated`: adjacent query blocks of a
// sequence share most of their selection (a slow random walk, like real models).
hal::HostTensor make_block_idx(const Batch& batch, int Bs, int Hs, int k, Rng& rng, bool correlated);

// Per selection head, per 64 consecutive query blocks, the average number of distinct
// blocks selected (realism statistic of perf-targets.md).
double distinct_blocks_per_64(const Batch& batch, const hal::HostTensor& block_idx);

// Attended (query, token) pairs per query head for the selections (valid, causal,
// in range, in a selected block), and the number of distinct (page, head-slot) blocks
// read, summed over selection heads.
struct SelectionStats {
  double pairs = 0;          // sum over tokens and selection heads of attended tokens
  double unique_blocks = 0;  // distinct (sequence, block, selection head)
};
SelectionStats selection_stats(const Batch& batch, int Bs, const hal::HostTensor& block_idx);

// Causal pairs of dense attention: sum over tokens of min(pos+1, kv_len).
double dense_pairs(const Batch& batch);

}  // namespace msa::cases
