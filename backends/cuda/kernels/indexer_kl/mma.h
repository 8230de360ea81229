// CUDA-only: indexer_kl on mma.sync tensor cores (mma.cu), for the calls
// choose_indexer_kl routes here (choose.h).
#pragma once
#include "backends/cuda/kernels/indexer_kl/choose.h"
#include "backends/cuda/stream.h"
#include "ops/args.h"

namespace msa::cuda {

// `items`: kl_items of the call's shape.
void indexer_kl_mma(Stream& st, const ops::IndexerKlArgs& a, const KlItems& items);

}  // namespace msa::cuda
