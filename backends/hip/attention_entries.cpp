// The HIP backend's entries of the forward attention ops: the portable tier's entries
// (backends/cuda/kernels/portable/), which the CUDA backend reaches through its choosers
// instead. Guarded like table.cpp: an op is offered when its portable file exists.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_entry.cuh"

namespace msa::MSA_GPU_NS {

#if MSA_PORTABLE_SPARSE_BLOCK_ATTENTION
void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  sparse_block_attention_portable(s, a);
}
#endif
#if MSA_PORTABLE_DENSE_ATTENTION
void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) { dense_attention_portable(s, a); }
#endif
#if MSA_PORTABLE_PATCH_ATTENTION_3D
void patch_attention_3d(hal::Stream& s, const ops::PatchAttention3dArgs& a) { patch_attention_3d_portable(s, a); }
#endif

}  // namespace msa::MSA_GPU_NS
