// CUDA-only: indexer_kl on mma.sync tensor cores (indexer_kl_mma.cu), called first by the
// portable launcher (kernels/portable/indexer_kl.cu). Returns false, launching nothing,
// when turned off (MSA_CUDA_KL_MMA=0), on the portable tier, before sm_80, on HIP, and for
// shapes or dtypes it does not cover; the portable kernels run then.
#pragma once
#include "backends/cuda/vendor.h"
#include "hal/stream.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

#if !defined(MSA_VENDOR_HIP) && !defined(__HIP_PLATFORM_AMD__)
bool launch_mma_indexer_kl(hal::Stream& s, const ops::IndexerKlArgs& a);
#else
inline bool launch_mma_indexer_kl(hal::Stream&, const ops::IndexerKlArgs&) { return false; }
#endif

}  // namespace msa::MSA_GPU_NS
