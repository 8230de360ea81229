// indexer_score on CUDA: the kernel choose_indexer_score picks (choose.h), launched.
#include "backends/cuda/kernels/indexer_score/choose.h"
#include "backends/cuda/kernels/indexer_score/decode_mma.h"
#include "backends/cuda/kernels/indexer_score/prefill.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/entries.h"

namespace msa::cuda {

void indexer_score(hal::Stream& s, const ops::IndexerScoreArgs& a) {
  if (a.NQ == 0 || a.block_table.dim(1) == 0) return;
  auto& st = gpu_stream(s);
  const IndexerShape sh = indexer_shape(a);
  switch (choose_indexer_score(sh, st.props(), st.tuning())) {
    case IndexerKernel::decode_mma:
      indexer_decode_mma(st, a);
      return;
    case IndexerKernel::prefill_wgmma:
      indexer_prefill_wgmma(st, a, sh);
      return;
    case IndexerKernel::prefill_tc:
      indexer_prefill_tc(st, a, sh);
      return;
    case IndexerKernel::portable:
      indexer_score_portable(s, a);
      return;
  }
}

}  // namespace msa::cuda
