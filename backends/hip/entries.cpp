// The HIP backend's entries of the ops whose portable kernels CUDA also chooses among
// (backends/cuda/kernels/portable/entries.h): HIP has the portable tier only, so each op
// is its portable entry. table.cpp registers them under the same MSA_PORTABLE_<OP> guards.
#include "backends/cuda/kernels/portable/entries.h"
#include "backends/cuda/kernels/kernels.h"

namespace msa::MSA_GPU_NS {

#if MSA_PORTABLE_INDEXER_SCORE
void indexer_score(hal::Stream& s, const ops::IndexerScoreArgs& a) { indexer_score_portable(s, a); }
#endif
#if MSA_PORTABLE_MATMUL
void matmul(hal::Stream& s, const ops::MatmulArgs& a) { matmul_portable(s, a); }
#endif
#if MSA_PORTABLE_SPARSE_BLOCK_ATTENTION_BACKWARD
void sparse_block_attention_backward(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) {
  sparse_block_attention_backward_portable(s, a);
}
#endif
#if MSA_PORTABLE_DENSE_ATTENTION_BACKWARD
void dense_attention_backward(hal::Stream& s, const ops::DenseAttentionBackwardArgs& a) {
  dense_attention_backward_portable(s, a);
}
#endif
#if MSA_PORTABLE_INDEXER_KL
void indexer_kl(hal::Stream& s, const ops::IndexerKlArgs& a) { indexer_kl_portable(s, a); }
#endif

}  // namespace msa::MSA_GPU_NS
