// CUDA-only: indexer_score for Qb = 1 batches of at most 64 queries (decode) with the dot
// products on tensor cores (indexer_decode_mma.cu). The default on the native tier (it
// passes `msa check --backend cuda --cases full` on the H200); MSA_CUDA_MMA_INDEXER=0
// turns it off. Returns false, launching nothing, when turned off, on the portable tier,
// before sm_80, and for shapes or dtypes it does not cover (keys bf16 with bf16 qi, fp8
// with bf16/f16 qi, or NVFP4 with bf16/f16 qi at Di = 128 and 2-byte aligned scales;
// Hi <= 8; Di 64 or 128; Bs a multiple of 16).
#pragma once
#include "backends/cuda/stream.h"
#include "ops/args.h"

namespace msa::cuda {

bool launch_mma_decode_indexer(hal::Stream& s, const ops::IndexerScoreArgs& a);

// indexer_score then block_topk in this one kernel (ops::indexer_topk): one select block
// per row after the indexer's blocks, waiting on its query block's arrival counter. Same
// coverage as above, plus rows of at most 2048 blocks (256K tokens at Bs = 128), at most
// one row per SM (NQ x Hs <= SMs) and a free per-stream counter slot;
// MSA_CUDA_FUSED_TOPK=0 turns it off. Returns false, launching nothing, otherwise.
bool launch_mma_decode_indexer_topk(hal::Stream& s, const ops::IndexerScoreArgs& a, const ops::BlockTopkArgs& t);

}  // namespace msa::cuda
