// The attended sets of an indexer_kl call (training_index.cuh), bound once for its portable
// kernels and CUDA's tensor-core ones: the sparse stage's block_idx, or the dense stage's
// every causal block.
#pragma once
#include "backends/cuda/kernels/portable/training_index.cuh"
#include "hal/op_id.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

inline AttendSets kl_attend_sets(Stream& st, const ops::IndexerKlArgs& a) {
  const bool sparse = a.stage == ops::KlStage::sparse;
  return attend_sets(st, a, a.q.dim(0), sparse ? &a.block_idx : nullptr, a.Qb, a.NQ, hal::OpId::indexer_kl);
}

}  // namespace msa::MSA_GPU_NS
