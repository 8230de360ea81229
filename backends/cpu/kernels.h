// The kernels of the `cpu` backend, one function per op, each defined in the file named
// after it (paged_attention.cpp holds dense and sparse attention, attention_backward.cpp their
// gradients). Ops without a kernel
// here use cpu-ref's (backends/cpu_ref/kernels.h).
#pragma once
#include "hal/stream.h"
#include "ops/args.h"

namespace msa::cpu {

void indexer_score(hal::Stream&, const ops::IndexerScoreArgs&);
void block_topk(hal::Stream&, const ops::BlockTopkArgs&);
void sparse_block_attention(hal::Stream&, const ops::SparseAttentionArgs&);
void dense_attention(hal::Stream&, const ops::DenseAttentionArgs&);
void patch_attention_3d(hal::Stream&, const ops::PatchAttention3dArgs&);
void kv_append(hal::Stream&, const ops::KvAppendArgs&);
void matmul(hal::Stream&, const ops::MatmulArgs&);
void rms_norm(hal::Stream&, const ops::RmsNormArgs&);
void rope(hal::Stream&, const ops::RopeArgs&);
void swiglu(hal::Stream&, const ops::SwigluArgs&);
void add(hal::Stream&, const ops::AddArgs&);
void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs&);
void dense_attention_backward(hal::Stream&, const ops::DenseAttentionBackwardArgs&);
void patch_attention_3d_backward(hal::Stream&, const ops::PatchAttention3dBackwardArgs&);
void indexer_kl(hal::Stream&, const ops::IndexerKlArgs&);

}  // namespace msa::cpu
