// CUDA-only: indexer_score for Qb = 1 batches of at most 64 queries (decode) with the dot
// products on tensor cores (indexer_decode_mma.cu). The default on the native tier (it
// passes `msa check --backend cuda --cases full` on the H200); MSA_CUDA_MMA_INDEXER=0
// turns it off. Returns false, launching nothing, when turned off, on the portable tier,
// before sm_80, and for shapes or dtypes it does not cover (keys bf16 with bf16 qi, or fp8
// with bf16/f16 qi; Hi <= 8; Di 64 or 128; Bs a multiple of 16).
#pragma once
#include "backends/cuda/stream.h"
#include "ops/args.h"

namespace msa::cuda {

bool launch_mma_decode_indexer(hal::Stream& s, const ops::IndexerScoreArgs& a);

}  // namespace msa::cuda
