// The op list: every op a backend may implement, as indices into a KernelTable. This is
// the one list the enum, the names, each backend's kernel declarations (ops/op_list.h)
// and their table registrations are generated from.
//
// X(name, Args): Args names the op's argument struct in ops/args.h. hal only carries the
// token; the expansions that use it are in ops/ and the backends, so hal does not depend
// on ops.
#pragma once
#include <string_view>

#include "hal/export.h"

namespace msa::hal {

// Ops with one kernel per backend.
#define MSA_FOR_EACH_KERNEL_OP(X)                                 \
  X(indexer_score, IndexerScoreArgs)                              \
  X(block_topk, BlockTopkArgs)                                    \
  X(sparse_block_attention, SparseAttentionArgs)                  \
  X(dense_attention, DenseAttentionArgs)                          \
  X(patch_attention_3d, PatchAttention3dArgs)                     \
  X(kv_append, KvAppendArgs)                                      \
  X(matmul, MatmulArgs)                                           \
  X(rms_norm, RmsNormArgs)                                        \
  X(layer_norm, LayerNormArgs)                                    \
  X(rope, RopeArgs)                                               \
  X(rope_3d, Rope3dArgs)                                          \
  X(swiglu, SwigluArgs)                                           \
  X(gelu, GeluArgs)                                               \
  X(add, AddArgs)                                                 \
  X(embedding, EmbeddingArgs)                                     \
  X(scatter_visual, ScatterVisualArgs)                            \
  X(argmax, ArgmaxArgs)                                           \
  X(sparse_block_attention_backward, SparseAttentionBackwardArgs) \
  X(dense_attention_backward, DenseAttentionBackwardArgs)         \
  X(patch_attention_3d_backward, PatchAttention3dBackwardArgs)    \
  X(indexer_kl, IndexerKlArgs)

// Composite ops: a sequence of kernel ops that a backend may fuse. Its table entry, when
// present, is the fused kernel, which may decline args it does not cover; ops/ then runs
// the parts (indexer_topk: indexer_score, then block_topk on its scores).
#define MSA_FOR_EACH_COMPOSITE_OP(X) X(indexer_topk, IndexerTopkArgs)

#define MSA_FOR_EACH_OP(X)  \
  MSA_FOR_EACH_KERNEL_OP(X) \
  MSA_FOR_EACH_COMPOSITE_OP(X)

enum class OpId : int {
#define MSA_OP_ENUM(name, Args) name,
  MSA_FOR_EACH_OP(MSA_OP_ENUM)
#undef MSA_OP_ENUM
};

inline constexpr int kOpCount = 0
#define MSA_OP_COUNT(name, Args) +1
    MSA_FOR_EACH_OP(MSA_OP_COUNT)
#undef MSA_OP_COUNT
    ;

inline constexpr int kKernelOpCount = 0
#define MSA_OP_COUNT(name, Args) +1
    MSA_FOR_EACH_KERNEL_OP(MSA_OP_COUNT)
#undef MSA_OP_COUNT
    ;

// True for the ops of MSA_FOR_EACH_COMPOSITE_OP (listed after the kernel ops).
constexpr bool is_composite(OpId op) { return static_cast<int>(op) >= kKernelOpCount; }

// "sparse_block_attention"
MSA_API const char* op_name(OpId op);
// Parses an op name; returns false when unknown.
MSA_API bool parse_op(std::string_view name, OpId& op);

}  // namespace msa::hal
