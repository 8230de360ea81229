// The query tiles of the attention backward's dq kernels (portable/attention_backward.cuh
// and CUDA's tensor-core one), plain C++ (the CUDA chooser sizes the grid with it too).
#pragma once
#include "backends/cuda/vendor.h"

namespace msa::MSA_GPU_NS {

// Query tiles of the dq kernel: tile_heads heads of the group x tile_tokens consecutive
// tokens (<= BQ rows), head_chunks tiles across the group.
struct DqTiling {
  int tile_heads = 1, tile_tokens = 1, head_chunks = 1;
  DqTiling(int G, int BQ)
      : tile_heads(G < BQ ? G : BQ), tile_tokens(BQ / tile_heads), head_chunks((G + tile_heads - 1) / tile_heads) {}
};

}  // namespace msa::MSA_GPU_NS
