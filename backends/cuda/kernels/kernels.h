// Entry points of the CUDA backend's kernels, one per op (kernels/portable/<op>.cu, or
// kernels/<op>/entry.cu where a chooser picks among CUDA-only variants and the portable
// kernel). table.cpp registers them.
#pragma once
#include "backends/cuda/vendor.h"
#include "hal/stream.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

void indexer_score(hal::Stream&, const ops::IndexerScoreArgs&);
void block_topk(hal::Stream&, const ops::BlockTopkArgs&);
void sparse_block_attention(hal::Stream&, const ops::SparseAttentionArgs&);
void dense_attention(hal::Stream&, const ops::DenseAttentionArgs&);
void patch_attention_3d(hal::Stream&, const ops::PatchAttention3dArgs&);
void kv_append(hal::Stream&, const ops::KvAppendArgs&);
void matmul(hal::Stream&, const ops::MatmulArgs&);
void rms_norm(hal::Stream&, const ops::RmsNormArgs&);
void layer_norm(hal::Stream&, const ops::LayerNormArgs&);
void rope(hal::Stream&, const ops::RopeArgs&);
void rope_3d(hal::Stream&, const ops::Rope3dArgs&);
void swiglu(hal::Stream&, const ops::SwigluArgs&);
void gelu(hal::Stream&, const ops::GeluArgs&);
void add(hal::Stream&, const ops::AddArgs&);
void embedding(hal::Stream&, const ops::EmbeddingArgs&);
void scatter_visual(hal::Stream&, const ops::ScatterVisualArgs&);
void argmax(hal::Stream&, const ops::ArgmaxArgs&);
// Training ops (f32 gradients, no float atomics: bitwise reproducible run to run).
void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs&);
void dense_attention_backward(hal::Stream&, const ops::DenseAttentionBackwardArgs&);
void patch_attention_3d_backward(hal::Stream&, const ops::PatchAttention3dBackwardArgs&);
void indexer_kl(hal::Stream&, const ops::IndexerKlArgs&);

// Largest block_score row block_topk handles (its keys live in shared memory).
inline constexpr int kTopkMaxBlocks = 32768;

}  // namespace msa::MSA_GPU_NS
