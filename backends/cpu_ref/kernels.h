// One function per op, each defined in <op>.cpp of this folder.
#pragma once
#include "hal/stream.h"
#include "ops/args.h"

namespace msa::cpu_ref {

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
void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs&);
void dense_attention_backward(hal::Stream&, const ops::DenseAttentionBackwardArgs&);
void patch_attention_3d_backward(hal::Stream&, const ops::PatchAttention3dBackwardArgs&);
void indexer_kl(hal::Stream&, const ops::IndexerKlArgs&);

}  // namespace msa::cpu_ref
