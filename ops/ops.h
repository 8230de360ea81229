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
#include "ops/args.h"

namespace msa::ops {

// NQ: the number of query blocks of a varlen batch (see the contract, "Query blocks").
// cu_q has B+1 entries, kv_len B. Throws msa::Error on inconsistent lengths or bad Qb.
int64_t count_query_blocks(std::span<const int32_t> cu_q, std::span<const int32_t> kv_len, int Qb);

void indexer_score(hal::Device& device, const IndexerScoreArgs& args);
void block_topk(hal::Device& device, const BlockTopkArgs& args);
// The composite op: indexer_score, then block_topk over the scores it writes, in one
// call, so a backend may fuse the select into the indexer (the CUDA decode path does).
// Outputs are exactly those of the two ops run in order, which is what runs where the
// backend has no fused kernel for these args.
void indexer_topk(hal::Device& device, const IndexerTopkArgs& args);
void sparse_block_attention(hal::Device& device, const SparseAttentionArgs& args);
void dense_attention(hal::Device& device, const DenseAttentionArgs& args);
void patch_attention_3d(hal::Device& device, const PatchAttention3dArgs& args);
void kv_append(hal::Device& device, const KvAppendArgs& args);
void matmul(hal::Device& device, const MatmulArgs& args);
void rms_norm(hal::Device& device, const RmsNormArgs& args);
void layer_norm(hal::Device& device, const LayerNormArgs& args);
void rope(hal::Device& device, const RopeArgs& args);
void rope_3d(hal::Device& device, const Rope3dArgs& args);
void swiglu(hal::Device& device, const SwigluArgs& args);
void gelu(hal::Device& device, const GeluArgs& args);
void add(hal::Device& device, const AddArgs& args);
void embedding(hal::Device& device, const EmbeddingArgs& args);
void scatter_visual(hal::Device& device, const ScatterVisualArgs& args);
void argmax(hal::Device& device, const ArgmaxArgs& args);

// Training ops (docs/training.md).
void sparse_block_attention_backward(hal::Device& device, const SparseAttentionBackwardArgs& args);
void dense_attention_backward(hal::Device& device, const DenseAttentionBackwardArgs& args);
void patch_attention_3d_backward(hal::Device& device, const PatchAttention3dBackwardArgs& args);
void indexer_kl(hal::Device& device, const IndexerKlArgs& args);

}  // namespace msa::ops
