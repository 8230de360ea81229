// sparse_block_attention_backward and dense_attention_backward on CUDA: the kernels
// choose_attention_backward picks (choose.h), launched on the call bound once.
#include "backends/cuda/kernels/attention_backward/choose.h"
#include "backends/cuda/kernels/attention_backward/mma.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::cuda {
namespace {

template <typename Args>
void run_backward(hal::Stream& s, const Args& a) {
  auto& st = gpu_stream(s);
  const BackwardShape sh = backward_shape(a);
  switch (choose_attention_backward(sh, st.props(), st.tuning())) {
    case BackwardKernel::mma:
      attention_backward_mma(st, bind_backward(st, a), backward_items(sh, st.tuning()));
      return;
    case BackwardKernel::portable:
      paged_backward_portable(st, bind_backward(st, a));
      return;
  }
}

}  // namespace

void sparse_block_attention_backward(hal::Stream& s, const ops::SparseAttentionBackwardArgs& a) { run_backward(s, a); }

void dense_attention_backward(hal::Stream& s, const ops::DenseAttentionBackwardArgs& a) { run_backward(s, a); }

}  // namespace msa::cuda
