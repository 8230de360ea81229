// The CUDA backend's kernel table: the portable tier's (portable_table.h) under CUDA's
// limits, plus the fused kernel of the composite indexer_topk.
#include "backends/cuda/device.h"
#include "backends/cuda/kernels/indexer_score/decode_mma.h"
#include "backends/cuda/portable_table.h"

namespace msa::MSA_GPU_NS {
namespace {

// indexer_topk's fused kernel on decode steps (the select in the indexer's last block);
// false, launching nothing, on the shapes it does not cover.
bool fused_indexer_topk(hal::Stream& s, const ops::IndexerTopkArgs& a) {
  return launch_mma_decode_indexer_topk(s, a.indexer, a.topk);
}

}  // namespace

hal::KernelTable make_kernel_table() {
  // The kernels opt in to the shared memory they need (up to 227 KiB on sm_90): no
  // limit below their own.
  hal::KernelTable t = make_portable_table(VendorLimits{});
  t.set(hal::OpId::indexer_topk, &fused_indexer_topk);
  return t;
}

}  // namespace msa::MSA_GPU_NS
