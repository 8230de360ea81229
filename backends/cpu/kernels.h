// The kernels of the `cpu` backend, one function per op, each defined in <op>.cpp of
// this folder. The ops not listed here use cpu-ref's (backends/cpu_ref/kernels.h).
#pragma once
#include "ops/op_list.h"

// The ops with a SIMD kernel here.
#define MSA_CPU_OPS(X)               \
  X(indexer_score)                   \
  X(block_topk)                      \
  X(sparse_block_attention)          \
  X(dense_attention)                 \
  X(patch_attention_3d)              \
  X(kv_append)                       \
  X(matmul)                          \
  X(rms_norm)                        \
  X(rope)                            \
  X(swiglu)                          \
  X(add)                             \
  X(sparse_block_attention_backward) \
  X(dense_attention_backward)        \
  X(patch_attention_3d_backward)     \
  X(indexer_kl)

namespace msa::cpu {

MSA_CPU_OPS(MSA_DECLARE_KERNEL_OF)

}  // namespace msa::cpu
