// The ops every backend may implement, as indices into a KernelTable.
// The argument struct of each op is in ops/args.h (same name in CamelCase + Args).
#pragma once
#include <string_view>

#include "hal/export.h"

namespace msa::hal {

#define MSA_FOR_EACH_OP(X)           \
  X(indexer_score)                   \
  X(block_topk)                      \
  X(sparse_block_attention)          \
  X(dense_attention)                 \
  X(patch_attention_3d)              \
  X(kv_append)                       \
  X(matmul)                          \
  X(rms_norm)                        \
  X(layer_norm)                      \
  X(rope)                            \
  X(rope_3d)                         \
  X(swiglu)                          \
  X(gelu)                            \
  X(add)                             \
  X(embedding)                       \
  X(scatter_visual)                  \
  X(argmax)                          \
  X(sparse_block_attention_backward) \
  X(dense_attention_backward)        \
  X(patch_attention_3d_backward)     \
  X(indexer_kl)

enum class OpId : int {
#define MSA_OP_ENUM(name) name,
  MSA_FOR_EACH_OP(MSA_OP_ENUM)
#undef MSA_OP_ENUM
};

inline constexpr int kOpCount = 0
#define MSA_OP_COUNT(name) +1
    MSA_FOR_EACH_OP(MSA_OP_COUNT)
#undef MSA_OP_COUNT
    ;

// "sparse_block_attention"
MSA_API const char* op_name(OpId op);
// Parses an op name; returns false when unknown.
MSA_API bool parse_op(std::string_view name, OpId& op);

}  // namespace msa::hal
