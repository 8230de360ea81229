// patch_attention_3d on the CUDA backend: asks the chooser (attention/choose.h) first,
// since the flash kernel takes chunks of attn_geom::kFaRows tokens and the shared-core
// kernels chunks of kRows, then builds the chunk table (binding) and launches.
#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/kernels.h"

namespace msa::cuda {

void patch_attention_3d(hal::Stream& s, const ops::PatchAttention3dArgs& a) {
  auto& st = gpu_stream(s);
  const PatchAttentionKernel kernel = choose_patch_attention(attn_call(st, a), st.props(), st.tuning());
  const int rows_per_chunk = kernel == PatchAttentionKernel::flash ? attn_geom::kFaRows : kRows;
  PatchParams p;
  if (!bind_patch_attention(st, a, rows_per_chunk, p)) return;
  const hal::DType dt = a.q.dtype;
  switch (kernel) {
    case PatchAttentionKernel::flash:
      return launch_flash_patch(st, p, dt);
    case PatchAttentionKernel::wmma:
      return launch_wmma_patch(st, p, dt);
    case PatchAttentionKernel::portable:
      return launch_patch_attention_portable(st, p, dt);
  }
}

}  // namespace msa::cuda
