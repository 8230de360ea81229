// The HIP backend's entries of the ops whose portable kernels CUDA also chooses among
// (backends/cuda/kernels/portable/entries.h): HIP has the portable tier only, so each op
// is its portable entry. The portable table (backends/cuda/portable_table.cpp) registers them.
#include "backends/cuda/kernels/portable/entries.h"
#include "backends/cuda/kernels/kernels.h"

namespace msa::MSA_GPU_NS {

void indexer_score(hal::Stream& s, const ops::IndexerScoreArgs& a) { indexer_score_portable(s, a); }
void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  sparse_block_attention_portable(s, a);
}
void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) { dense_attention_portable(s, a); }
void patch_attention_3d(hal::Stream& s, const ops::PatchAttention3dArgs& a) { patch_attention_3d_portable(s, a); }
void matmul(hal::Stream& s, const ops::MatmulArgs& a) { matmul_portable(s, a); }
void sparse_block_attention_backward(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) {
  sparse_block_attention_backward_portable(s, a);
}
void dense_attention_backward(hal::Stream& s, const ops::DenseAttentionBackwardArgs& a) {
  dense_attention_backward_portable(s, a);
}
void indexer_kl(hal::Stream& s, const ops::IndexerKlArgs& a) { indexer_kl_portable(s, a); }

}  // namespace msa::MSA_GPU_NS
