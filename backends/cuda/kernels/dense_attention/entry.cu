// dense_attention on the CUDA backend: binds the arguments once, asks the chooser
// (attention/choose.h) and launches the kernel it names.
#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace msa::cuda {

void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) {
  auto& st = gpu_stream(s);
  DenseParams p;
  if (!bind_dense_attention(st, a, p)) return;
  const hal::DType dt = a.q.dtype;
  switch (choose_dense_attention(attn_call(st, p, dt), st.props(), st.tuning())) {
    case DenseAttentionKernel::decode_split:
      return launch_decode_split_dense(st, p, dt);
    case DenseAttentionKernel::flash_wgmma:
      return launch_flash_wgmma(st, p, dt);
    case DenseAttentionKernel::flash:
      return launch_flash_dense(st, p, dt);
    case DenseAttentionKernel::wmma:
      return launch_wmma_dense(st, p, dt);
    case DenseAttentionKernel::portable:
      return launch_dense_attention_portable(st, p, dt);
  }
}

}  // namespace msa::cuda
