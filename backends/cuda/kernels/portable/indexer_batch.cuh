// The batch view (seq.cuh) of an indexer_score call, bound once for every indexer kernel
// (the portable one and CUDA's tensor-core ones).
#pragma once
#include <algorithm>

#include "backends/cuda/kernels/portable/paged_batch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "backends/cuda/stream.h"
#include "hal/op_id.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

inline Batch indexer_batch(const Stream& st, const ops::IndexerScoreArgs& a) {
  return to_batch(st, ops::batch_of(a), a.qi.dim(0), a.ki_cache.dim(1), a.ki_cache.dim(0), hal::OpId::indexer_score);
}

// Thread blocks of `warps_per_block` warps per query block for the decode-style indexer
// kernels, whose warps each own a strided set of KV blocks: about 32 warps per SM in all,
// at most one per KV block.
inline int indexer_splits(const Stream& st, int64_t NQ, int max_blocks, int warps_per_block) {
  const int64_t want_warps = int64_t{st.props().sm_count} * 32;
  const int64_t nq = std::max<int64_t>(NQ, 1);
  const int64_t warps_per_qb = std::clamp<int64_t>((want_warps + nq - 1) / nq, 1, std::max(max_blocks, 1));
  return static_cast<int>((warps_per_qb + warps_per_block - 1) / warps_per_block);
}

}  // namespace msa::MSA_GPU_NS
