// The portable tier's entries of the ops that CUDA's native tier also covers: CUDA's op
// entries (kernels/<op>/entry.cu) launch them where their chooser picks the portable
// kernel; HIP registers them as the ops (backends/hip/entries.cpp).
#pragma once
#include "backends/cuda/vendor.h"
#include "hal/stream.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

void indexer_score_portable(hal::Stream&, const ops::IndexerScoreArgs&);
void sparse_block_attention_portable(hal::Stream&, const ops::SparseAttentionArgs&);
void dense_attention_portable(hal::Stream&, const ops::DenseAttentionArgs&);
void patch_attention_3d_portable(hal::Stream&, const ops::PatchAttention3dArgs&);
void matmul_portable(hal::Stream&, const ops::MatmulArgs&);
void sparse_block_attention_backward_portable(hal::Stream&, const ops::SparseAttentionBackwardArgs&);
void dense_attention_backward_portable(hal::Stream&, const ops::DenseAttentionBackwardArgs&);
void indexer_kl_portable(hal::Stream&, const ops::IndexerKlArgs&);

}  // namespace msa::MSA_GPU_NS
