// dense_attention on the portable tier: every valid, causal cached token. Query rows are
// chunks of a sequence's tokens x the G heads of one KV head (up to 16 rows per thread
// block); the KV blocks 0 .. (last row's position)/Bs are split over several thread
// blocks when the grid would be small (decode), merged by LSE in fixed order. The CUDA
// backend's entry (kernels/dense_attention/entry.cu) binds here too and takes these
// kernels where its chooser says portable.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_entry.cuh"

namespace msa::MSA_GPU_NS {

bool bind_dense_attention(Stream& st, const ops::DenseAttentionArgs& a, DenseParams& p) {
  const int64_t T = a.q.dim(0);
  if (T == 0 || a.block_table.dim(1) == 0) return false;
  bind_paged_attention(st, a, hal::OpId::dense_attention, p);
  return true;
}

void launch_dense_attention_portable(Stream& st, DenseParams& p, hal::DType dt) {
  MSA_DISPATCH_ACT(dt, DT, run_dense_tiles<FmaCore, DT>(st, p));
}

void dense_attention_portable(hal::Stream& s, const ops::DenseAttentionArgs& a) {
  auto& st = gpu_stream(s);
  DenseParams p;
  if (bind_dense_attention(st, a, p)) launch_dense_attention_portable(st, p, a.q.dtype);
}

}  // namespace msa::MSA_GPU_NS
