// The Vulkan kernels: one host function per op (recording its dispatch on the stream)
// and its supports() predicate ("" = supported, else why not). Defined in the .cpp
// named after the shader family: attention.cpp, indexer.cpp, kv_append.cpp,
// matmul.cpp, norm.cpp, rope.cpp, eltwise.cpp, tokens.cpp; the training ops in
// paged_attention_backward.cpp (sparse and dense), patch_attention_3d_backward.cpp and
// indexer_kl.cpp.
#pragma once
#include <string>

#include "hal/stream.h"
#include "ops/args.h"

namespace msa::vulkan {

#define MSA_VK_KERNEL(name, Args)            \
  void name(hal::Stream&, const ops::Args&); \
  std::string supports_##name(const ops::Args&);

MSA_VK_KERNEL(indexer_score, IndexerScoreArgs)
MSA_VK_KERNEL(block_topk, BlockTopkArgs)
MSA_VK_KERNEL(sparse_block_attention, SparseAttentionArgs)
MSA_VK_KERNEL(dense_attention, DenseAttentionArgs)
MSA_VK_KERNEL(patch_attention_3d, PatchAttention3dArgs)
MSA_VK_KERNEL(kv_append, KvAppendArgs)
MSA_VK_KERNEL(matmul, MatmulArgs)
MSA_VK_KERNEL(rms_norm, RmsNormArgs)
MSA_VK_KERNEL(layer_norm, LayerNormArgs)
MSA_VK_KERNEL(rope, RopeArgs)
MSA_VK_KERNEL(rope_3d, Rope3dArgs)
MSA_VK_KERNEL(swiglu, SwigluArgs)
MSA_VK_KERNEL(gelu, GeluArgs)
MSA_VK_KERNEL(add, AddArgs)
MSA_VK_KERNEL(embedding, EmbeddingArgs)
MSA_VK_KERNEL(scatter_visual, ScatterVisualArgs)
MSA_VK_KERNEL(argmax, ArgmaxArgs)
MSA_VK_KERNEL(sparse_block_attention_backward, SparseAttentionBackwardArgs)
MSA_VK_KERNEL(dense_attention_backward, DenseAttentionBackwardArgs)
MSA_VK_KERNEL(patch_attention_3d_backward, PatchAttention3dBackwardArgs)
MSA_VK_KERNEL(indexer_kl, IndexerKlArgs)

#undef MSA_VK_KERNEL

}  // namespace msa::vulkan
