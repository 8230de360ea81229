// CUDA-only: indexer_score for Qb = 1 batches of a few tokens per sequence (decode,
// multi-token decode) with the dot products on tensor cores (decode_mma.cu), for the calls
// choose_indexer_score routes here (choose.h: which keys, heads and dims it covers).
#pragma once
#include "backends/cuda/stream.h"
#include "ops/args.h"

namespace msa::cuda {

void indexer_decode_mma(Stream& st, const ops::IndexerScoreArgs& a);

// indexer_score then block_topk in this one kernel (ops::indexer_topk) where
// choose_indexer_topk picks it and the stream has a free counter slot; returns false,
// launching nothing, otherwise (the caller runs the two ops).
bool launch_mma_decode_indexer_topk(hal::Stream& s, const ops::IndexerScoreArgs& a, const ops::BlockTopkArgs& t);

}  // namespace msa::cuda
