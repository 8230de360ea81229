// Synthetic block selections for timing the training ops on a controlled selection
// instead of the indexer's: the definition bench/python/bench_training.py uses, so that
// `msa layer --backward`, msa-bench's msa_layer_backward cases and the Python benchmark
// measure the same thing (docs/training.md, "Benchmarks").
#pragma once
#include <cstdint>
#include <string_view>

#include "check/batch.h"
#include "hal/host_tensor.h"

namespace msa::cases {

enum class SyntheticSelection {
  random,      // the non-forced blocks by independent uniform scores per query block
  correlated,  // by scores interpolated between anchors that drift slowly (AR(1) steps)
};

// Positions between the anchors of the correlated selections.
constexpr int64_t kSelectionDrift = 64;
// AR(1) coefficient from one anchor to the next.
constexpr double kSelectionDriftRho = 0.95;

// "random" or "correlated"; otherwise msa::Error naming `arg`.
SyntheticSelection parse_synthetic_selection(std::string_view name, std::string_view arg);
const char* synthetic_selection_name(SyntheticSelection kind);

// block_idx [NQ][Hs][k] i32, ascending, -1 padded, for the query blocks of `batch`: per
// query block with positions [p0, p1], every valid block (0 .. floor(p1/Bs)) where there
// are at most k; else the blocks block_topk forces (0 .. n_sink-1 and the n_local blocks up
// to each position's own, clipped) and the highest-scoring other valid blocks up to k
// (ties to the lower block). Scores per (query block, selection head, block): `random`
// uniform; `correlated` (1-w)*a[i] + w*a[i+1] with i = floor(p1/64), w = (p1 mod 64)/64,
// anchors a[0] ~ N(0,1) and a[i] = 0.95*a[i-1] + sqrt(1-0.95^2)*N(0,1) per sequence, so
// adjacent queries share most blocks and the set drifts slowly. With n_sink = n_local =
// 1 and Qb = 1 this is bench_training.py's `selections`. Throws msa::Error when the
// forced blocks do not fit k.
hal::HostTensor synthetic_block_idx(const Batch& batch, int Bs, int Hs, int k, int n_sink, int n_local,
                                    SyntheticSelection kind, uint64_t seed);

// Mean share of a query block's selected blocks that the next query block of the same
// sequence also selects, over the last `sample` such pairs (bench_training.py's
// adjacent_overlap at Qb = 1).
double adjacent_overlap(const Batch& batch, const hal::HostTensor& block_idx, int64_t sample = 4096);

}  // namespace msa::cases
