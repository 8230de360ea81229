// sparse_block_attention on the CUDA backend: binds the arguments once, asks the chooser
// (attention/choose.h) and launches the kernel it names.
#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace msa::cuda {

void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  auto& st = gpu_stream(s);
  SparseParams p;
  if (!bind_sparse_attention(st, a, p)) return;
  const hal::DType dt = a.q.dtype;
  switch (choose_sparse_attention(attn_call(st, p, dt), st.props(), st.tuning())) {
    case SparseAttentionKernel::decode_cluster:
      return launch_decode_cluster(st, p, dt);
    case SparseAttentionKernel::decode_split:
      return launch_decode_split_sparse(st, p, dt);
    case SparseAttentionKernel::by_union:
      return launch_sparse_by_union(st, p, dt);
    case SparseAttentionKernel::kv_outer:
      return launch_kv_outer_sparse(st, p, dt);
    case SparseAttentionKernel::flash:
      return launch_flash_sparse(st, p, dt);
    case SparseAttentionKernel::wmma:
      return launch_wmma_sparse(st, p, dt);
    case SparseAttentionKernel::portable:
      return launch_sparse_attention_portable(st, p, dt);
  }
}

}  // namespace msa::cuda
