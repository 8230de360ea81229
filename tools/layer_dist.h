// `msa layer --gpus N`: the MSA layer problem of layer_bench.h split over the ranks of a
// dist::World, in one of two ways:
//  - heads: rank r owns KV heads [r*Hkv/N, (r+1)*Hkv/N), their query heads and (per-KV-head
//    selection) their index heads; the indexer key cache is replicated. No transfer.
//  - heads-sharded-ki (decode): heads as above, but the indexer keys are split by context
//    (rank r keeps KV blocks [r*M, (r+1)*M) of the key head, M = ceil(blocks / N)); every
//    rank scores its key range for all index heads, the block scores are all-gathered
//    (B x Hi x blocks floats) and each rank gathers its own heads' rows for block_topk.
//    Each rank then streams 1/N of the indexer keys instead of all of them.
//  - context: the KV cache of every sequence is split into N block-aligned ranges, one per
//    rank, and each query token goes to the rank that owns its position. The indexer keys
//    are all-gathered (small: Di values per token), every rank scores and selects the
//    blocks of its own queries, then fetches the selected blocks that other ranks own
//    (request lists and page copies through all_to_all) into staging pages, and runs the
//    sparse attention once. Each query then sees exactly the blocks it selected, so no
//    LSE merge of partial results is needed (docs/distributed.md says why).
// The outputs are assembled on the host in the single-device layout for the cross-check.
#pragma once
#include <string>

#include "hal/host_tensor.h"
#include "tools/layer_bench.h"

namespace msa::cli {

enum class Parallel { heads, heads_sharded_ki, context };
Parallel parse_parallel(const std::string& s);

struct DistLayerResult {
  // Per phase: the median over iterations of the slowest rank.
  double indexer_ms = 0, topk_ms = 0, fetch_ms = 0, sparse_ms = 0;
  double layer_ms = 0;         // the whole step (wall, slowest rank, median)
  int64_t fetched_blocks = 0;  // (context) pages copied between ranks per step, all ranks
  hal::HostTensor block_idx;   // [NQ][Hs][k] in the single-device layout
  hal::HostTensor sparse_out;  // [T][Hq][D]
};

// Runs `prob` on `world` ranks of `backend` (see dist::World): one warm-up step, then
// `iters` timed steps.
DistLayerResult run_layer_dist(const LayerProblem& prob, const std::string& backend, int world, Parallel mode,
                               int iters);

}  // namespace msa::cli
