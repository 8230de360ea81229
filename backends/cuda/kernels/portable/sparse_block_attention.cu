// sparse_block_attention on the portable tier: for each query block and KV head, the G
// query heads of the group x the query block's tokens (up to 16 rows per thread block)
// attend to the KV blocks listed in block_idx. Each selected (page, KV head) slab is one
// contiguous read that serves the whole GQA group. Decode splits the selected blocks over
// several thread blocks (split-KV) and merges the partials by their LSE in fixed split
// order. Entries < 0 or past the sequence's last block contribute nothing; a bad page id
// is skipped and flagged. No allocation or host sync: partials live in the stream's
// workspace. The CUDA backend's entry (kernels/sparse_block_attention/entry.cu) binds
// here too and takes these kernels where its chooser says portable.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_entry.cuh"

namespace msa::MSA_GPU_NS {

bool bind_sparse_attention(Stream& st, const ops::SparseAttentionArgs& a, SparseParams& p) {
  const int64_t T = a.q.dim(0);
  if (a.NQ == 0 || T == 0) return false;
  bind_paged_attention(st, a, hal::OpId::sparse_block_attention, p);
  p.bidx = a.block_idx.data<int32_t>();
  p.Qb = a.Qb;
  p.NQ = a.NQ;
  p.k = static_cast<int>(a.block_idx.dim(2));
  p.Hs = static_cast<int>(a.block_idx.dim(1));
  p.nrc = static_cast<int>((std::min<int64_t>(a.Qb, T) + p.tpc - 1) / p.tpc);
  return true;
}

void launch_sparse_attention_portable(Stream& st, SparseParams& p, hal::DType dt) {
  MSA_DISPATCH_ACT(dt, DT, run_sparse_tiles<FmaCore, DT>(st, p));
}

void sparse_block_attention_portable(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  auto& st = gpu_stream(s);
  SparseParams p;
  if (bind_sparse_attention(st, a, p)) launch_sparse_attention_portable(st, p, a.q.dtype);
}

}  // namespace msa::MSA_GPU_NS
