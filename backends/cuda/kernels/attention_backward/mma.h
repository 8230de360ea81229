// CUDA-only: sparse_block_attention_backward and dense_attention_backward on mma.sync
// tensor cores (mma.cu), for the calls choose_attention_backward routes here (choose.h).
#pragma once
#include "backends/cuda/kernels/attention_backward/choose.h"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::cuda {

// `items`: backward_items of the call's shape.
void attention_backward_mma(Stream& st, const PagedBackwardCall& c, const BackwardItems& items);

}  // namespace msa::cuda
