// indexer_kl on CUDA: the kernels choose_indexer_kl picks (choose.h), launched.
#include "backends/cuda/kernels/indexer_kl/choose.h"
#include "backends/cuda/kernels/indexer_kl/mma.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/entries.h"

namespace msa::cuda {

void indexer_kl(hal::Stream& s, const ops::IndexerKlArgs& a) {
  auto& st = gpu_stream(s);
  const KlShape sh = kl_shape(a);
  switch (choose_indexer_kl(sh, st.props(), st.tuning())) {
    case KlKernel::mma:
      indexer_kl_mma(st, a, kl_items(sh, st.tuning()));
      return;
    case KlKernel::portable:
      indexer_kl_portable(s, a);
      return;
  }
}

}  // namespace msa::cuda
