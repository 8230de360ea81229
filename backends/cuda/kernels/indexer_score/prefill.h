// CUDA-only: indexer_score for prefill-like calls (many queries per sequence) on tensor
// cores, for the calls choose_indexer_score routes to each (choose.h): on mma.sync
// (prefill_tc.cu, sm_80+) and on wgmma + TMA (prefill_wgmma.cu, sm_90a).
#pragma once
#include "backends/cuda/kernels/indexer_score/choose.h"
#include "backends/cuda/stream.h"
#include "ops/args.h"

namespace msa::cuda {

void indexer_prefill_tc(Stream& st, const ops::IndexerScoreArgs& a, const IndexerShape& sh);
void indexer_prefill_wgmma(Stream& st, const ops::IndexerScoreArgs& a, const IndexerShape& sh);

}  // namespace msa::cuda
