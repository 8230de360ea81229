// The op API: one function per op of the contract (docs/spec.md). Each checks shapes,
// dtypes, scalar parameters and the selection mode on the host before any work and
// throws msa::Error naming the argument, resolves defaults, then enqueues the device's
// kernel on device.stream(). Every tensor must live on `device`. Index data living on
// the device (page ids, block indices, lengths) is checked by the kernels (CPU backends
// throw at once; GPU backends raise at the next Stream::synchronize()).
#pragma once
#include <cstdint>
#include <span>

#include "hal/device.h"
#include "hal/export.h"
#include "ops/args.h"

namespace msa::ops {

// NQ: the number of query blocks of a varlen batch (see the contract, "Query blocks").
// cu_q has B+1 entries, kv_len B. Throws msa::Error on inconsistent lengths or bad Qb.
MSA_API int64_t count_query_blocks(std::span<const int32_t> cu_q, std::span<const int32_t> kv_len, int Qb);

MSA_API void indexer_score(hal::Device& device, const IndexerScoreArgs& args);
MSA_API void block_topk(hal::Device& device, const BlockTopkArgs& args);
// The composite op: indexer_score, then block_topk over the scores it writes, in one
// call, so a backend may fuse the select into the indexer (the CUDA decode path does).
// Outputs are exactly those of the two ops run in order, which is what runs where the
// backend has no fused kernel for these args.
MSA_API void indexer_topk(hal::Device& device, const IndexerTopkArgs& args);
MSA_API void sparse_block_attention(hal::Device& device, const SparseAttentionArgs& args);
MSA_API void dense_attention(hal::Device& device, const DenseAttentionArgs& args);
MSA_API void patch_attention_3d(hal::Device& device, const PatchAttention3dArgs& args);
MSA_API void kv_append(hal::Device& device, const KvAppendArgs& args);
MSA_API void matmul(hal::Device& device, const MatmulArgs& args);
MSA_API void rms_norm(hal::Device& device, const RmsNormArgs& args);
MSA_API void layer_norm(hal::Device& device, const LayerNormArgs& args);
MSA_API void rope(hal::Device& device, const RopeArgs& args);
MSA_API void rope_3d(hal::Device& device, const Rope3dArgs& args);
MSA_API void swiglu(hal::Device& device, const SwigluArgs& args);
MSA_API void gelu(hal::Device& device, const GeluArgs& args);
MSA_API void add(hal::Device& device, const AddArgs& args);
MSA_API void embedding(hal::Device& device, const EmbeddingArgs& args);
MSA_API void scatter_visual(hal::Device& device, const ScatterVisualArgs& args);
MSA_API void argmax(hal::Device& device, const ArgmaxArgs& args);

// Training ops (docs/training.md).
MSA_API void sparse_block_attention_backward(hal::Device& device, const SparseAttentionBackwardArgs& args);
MSA_API void dense_attention_backward(hal::Device& device, const DenseAttentionBackwardArgs& args);
MSA_API void patch_attention_3d_backward(hal::Device& device, const PatchAttention3dBackwardArgs& args);
MSA_API void indexer_kl(hal::Device& device, const IndexerKlArgs& args);

}  // namespace msa::ops
