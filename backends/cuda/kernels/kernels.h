// Entry points of the CUDA backend's kernels, one per kernel op of the op list
// (hal/op_id.h): kernels/portable/<op>.cu, or kernels/<op>/entry.cu where a chooser picks
// among CUDA-only variants and the portable kernel (whose entry is then <op>_portable,
// kernels/portable/entries.h; HIP forwards to it in backends/hip/entries.cpp). The
// portable table (portable_table.h) registers them.
#pragma once
#include "backends/cuda/vendor.h"
#include "ops/op_list.h"

namespace msa::MSA_GPU_NS {

// The training ops' kernels give f32 gradients without float atomics: bitwise
// reproducible run to run.
MSA_FOR_EACH_KERNEL_OP(MSA_DECLARE_KERNEL)

// Largest block_score row block_topk handles (its keys live in shared memory).
inline constexpr int kTopkMaxBlocks = 32768;

}  // namespace msa::MSA_GPU_NS
