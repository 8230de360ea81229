// Entry points of the CUDA backend's kernels, one per kernel op of the op list
// (hal/op_id.h), each in kernels/portable/<op>.cu; the tuned CUDA-only variants are
// selected inside these. The portable table (portable_table.h) registers them.
#pragma once
#include "backends/cuda/vendor.h"
#include "ops/op_list.h"

namespace msa::MSA_GPU_NS {

// The training ops' kernels give f32 gradients without float atomics: bitwise
// reproducible run to run.
MSA_FOR_EACH_KERNEL_OP(MSA_DECLARE_KERNEL)

// Largest block_score row block_topk handles (its keys live in shared memory).
inline constexpr int kTopkMaxBlocks = 32768;

#if !defined(MSA_VENDOR_HIP) && !defined(__HIP_PLATFORM_AMD__)
// CUDA-only: y = x W^T (+ bias) through cuBLAS (kernels/cuda_only/cublas_matmul.cu).
// Returns false when this dtype is not routed to cuBLAS.
bool cublas_matmul(hal::Stream&, const ops::MatmulArgs&);
// CUDA-only: indexer_score on tensor cores for prefill-like batches (many queries per
// sequence; kernels/cuda_only/indexer_tc.cu). Returns false, launching nothing, on the
// portable tier and for shapes or dtypes it does not cover.
bool launch_tc_indexer(hal::Stream&, const ops::IndexerScoreArgs&);
// CUDA-only Hopper tier: the same on wgmma + TMA (kernels/cuda_only/indexer_wgmma.cu) for
// sm_90 and bf16 qi/keys; false (nothing launched) elsewhere or with
// MSA_CUDA_WGMMA_INDEXER=0.
bool launch_wgmma_indexer(hal::Stream&, const ops::IndexerScoreArgs&);
#endif

}  // namespace msa::MSA_GPU_NS
