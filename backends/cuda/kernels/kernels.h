// Entry points of the CUDA backend's kernels, one per op (kernels/portable/<op>.cu; the
// tuned CUDA-only variants are selected inside these). table.cpp registers them.
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

#if !defined(MSA_VENDOR_HIP) && !defined(__HIP_PLATFORM_AMD__)
// CUDA-only: y = x W^T (+ bias) through cuBLAS (kernels/cuda_only/cublas_matmul.cu).
// Returns false when this dtype is not routed to cuBLAS.
bool cublas_matmul(hal::Stream&, const ops::MatmulArgs&);
// CUDA-only: indexer_score on tensor cores for prefill-like batches (many queries per
// sequence; kernels/cuda_only/indexer_tc.cu). Returns false, launching nothing, on the
// portable tier and for shapes or dtypes it does not cover.
bool launch_tc_indexer(hal::Stream&, const ops::IndexerScoreArgs&);
// CUDA-only Hopper tier: the same on wgmma + TMA (kernels/cuda_only/indexer_wgmma.cu) for
// sm_90 and bf16 qi/keys; false (nothing launched) elsewhere or with
// MSA_CUDA_WGMMA_INDEXER=0.
bool launch_wgmma_indexer(hal::Stream&, const ops::IndexerScoreArgs&);
#endif

}  // namespace msa::MSA_GPU_NS
