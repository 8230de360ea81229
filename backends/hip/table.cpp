// The portable tier's kernel table (see table.h). An op is offered only when its
// portable source was compiled (MSA_PORTABLE_<OP>); the others say why they are absent.
// The size limits mirror backends/cuda/table.cpp for the same kernels (keep them in
// step), plus the one AMD adds: a workgroup has 64 KiB of LDS (CDNA 1-3), so a kernel
// whose shared memory does not fit is refused rather than failing at launch. Compiled as
// device code (hipcc, or the CPU emulation) to read the kernels' shared-memory layouts.
#include "backends/hip/table.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/training_limits.h"
#if MSA_PORTABLE_SPARSE_BLOCK_ATTENTION || MSA_PORTABLE_DENSE_ATTENTION || MSA_PORTABLE_PATCH_ATTENTION_3D
#include "backends/cuda/kernels/portable/attention_launch.cuh"
#define MSA_HAVE_ATTN_LAYOUT 1
#endif

namespace msa::MSA_GPU_NS {
namespace {

using hal::OpId;

// Shared memory per workgroup on AMD CDNA 1-3 (MI100 to MI300).
constexpr int64_t kLdsBytes = 64 * 1024;

[[maybe_unused]] std::string attention_dims(int64_t D, int64_t Hq, int64_t Hkv, hal::DType dt) {
  const int64_t per16 = 16 / static_cast<int64_t>(hal::dtype_size(dt));
#if MSA_HAVE_ATTN_LAYOUT
  if (D <= 128) {
    int64_t bytes = 0;
    MSA_DISPATCH_ACT(dt, DT, MSA_DISPATCH_DP(D, DP, bytes = AttnLayout<DT, DP>::BYTES));
    if (bytes > kLdsBytes)
      return "head dim D = " + std::to_string(D) + " in " + hal::dtype_name(dt) + " needs " + std::to_string(bytes) +
             " bytes of shared memory per block; an AMD workgroup has " + std::to_string(kLdsBytes) + " (LDS)";
  }
#endif
  if (D > 128)
    return "head dim D = " + std::to_string(D) + " > 128 is not supported by the " MSA_VENDOR_NAME " kernels";
  if (D % per16 != 0)
    return "head dim D = " + std::to_string(D) + " must be a multiple of " + std::to_string(per16) +
           " (16-byte rows) on " MSA_VENDOR_NAME;
  if (Hkv > 0 && Hq / Hkv > 16) return "GQA group G = Hq/Hkv > 16 is not supported by the " MSA_VENDOR_NAME " kernels";
  return "";
}

#if MSA_PORTABLE_SPARSE_BLOCK_ATTENTION
std::string sparse_supports(const ops::SparseAttentionArgs& a) {
  return attention_dims(a.q.dim(2), a.q.dim(1), a.k_cache.dim(1), a.q.dtype);
}
#endif
#if MSA_PORTABLE_DENSE_ATTENTION
std::string dense_supports(const ops::DenseAttentionArgs& a) {
  return attention_dims(a.q.dim(2), a.q.dim(1), a.k_cache.dim(1), a.q.dtype);
}
#endif
#if MSA_PORTABLE_PATCH_ATTENTION_3D
std::string patch_supports(const ops::PatchAttention3dArgs& a) {
  return attention_dims(a.q.dim(2), a.q.dim(1), a.q.dim(1), a.q.dtype);
}
#endif
#if MSA_PORTABLE_INDEXER_SCORE
std::string indexer_supports(const ops::IndexerScoreArgs& a) {
  const int64_t Di = a.qi.dim(2);
  if (Di > 128)
    return "indexer head dim Di = " + std::to_string(Di) + " > 128 is not supported by the " MSA_VENDOR_NAME " kernels";
  if (Di % 16 != 0)
    return "indexer head dim Di = " + std::to_string(Di) + " must be a multiple of 16 on " MSA_VENDOR_NAME;
  // The kernel reads keys in 16-byte chunks: refuse a misaligned view instead of faulting.
  if (a.ki_cache.present() && reinterpret_cast<uintptr_t>(a.ki_cache.data<char>()) % 16 != 0)
    return "ki_cache must start at a 16-byte aligned address on " MSA_VENDOR_NAME;
  return "";
}
#endif
#if MSA_PORTABLE_BLOCK_TOPK
// block_topk keeps a row's keys in shared memory (4 bytes per block, beside ~9 KiB of
// static arrays). An AMD workgroup has 64 KiB of LDS (CDNA 1-3), less than the CUDA
// limit kTopkMaxBlocks assumes.
constexpr int64_t kLdsTopkMaxBlocks = (kLdsBytes - 9 * 1024) / 4;
std::string topk_supports(const ops::BlockTopkArgs& a) {
  const int64_t limit = std::min<int64_t>(kTopkMaxBlocks, kLdsTopkMaxBlocks);
  if (a.block_score.dim(2) > limit)
    return "max_blocks = " + std::to_string(a.block_score.dim(2)) + " > " + std::to_string(limit) +
           " is not supported by the " MSA_VENDOR_NAME " block_topk (keys must fit 64 KiB of LDS)";
  return "";
}
#endif

// Records why `op` is absent.
[[maybe_unused]] void absent(hal::KernelTable& t, OpId op, const char* file) {
  t.set_unsupported(op, std::string("no portable kernel in this build (backends/cuda/kernels/portable/") + file +
                            " does not exist yet)");
}

}  // namespace

hal::KernelTable make_portable_table() {
  hal::KernelTable t;
#if MSA_PORTABLE_INDEXER_SCORE
  t.set(OpId::indexer_score, &indexer_score);
  t.set_supports(OpId::indexer_score, &indexer_supports);
#else
  absent(t, OpId::indexer_score, "indexer_score.cu");
#endif
#if MSA_PORTABLE_BLOCK_TOPK
  t.set(OpId::block_topk, &block_topk);
  t.set_supports(OpId::block_topk, &topk_supports);
#else
  absent(t, OpId::block_topk, "block_topk.cu");
#endif
#if MSA_PORTABLE_SPARSE_BLOCK_ATTENTION
  t.set(OpId::sparse_block_attention, &sparse_block_attention);
  t.set_supports(OpId::sparse_block_attention, &sparse_supports);
#else
  absent(t, OpId::sparse_block_attention, "sparse_block_attention.cu");
#endif
#if MSA_PORTABLE_DENSE_ATTENTION
  t.set(OpId::dense_attention, &dense_attention);
  t.set_supports(OpId::dense_attention, &dense_supports);
#else
  absent(t, OpId::dense_attention, "dense_attention.cu");
#endif
#if MSA_PORTABLE_PATCH_ATTENTION_3D
  t.set(OpId::patch_attention_3d, &patch_attention_3d);
  t.set_supports(OpId::patch_attention_3d, &patch_supports);
#else
  absent(t, OpId::patch_attention_3d, "patch_attention_3d.cu");
#endif
#if MSA_PORTABLE_KV_APPEND
  t.set(OpId::kv_append, &kv_append);
#else
  absent(t, OpId::kv_append, "kv_append.cu");
#endif
#if MSA_PORTABLE_MATMUL
  t.set(OpId::matmul, &matmul);
#else
  absent(t, OpId::matmul, "matmul.cu");
#endif
#if MSA_PORTABLE_RMS_NORM
  t.set(OpId::rms_norm, &rms_norm);
#else
  absent(t, OpId::rms_norm, "rms_norm.cu");
#endif
#if MSA_PORTABLE_LAYER_NORM
  t.set(OpId::layer_norm, &layer_norm);
#else
  absent(t, OpId::layer_norm, "layer_norm.cu");
#endif
#if MSA_PORTABLE_ROPE
  t.set(OpId::rope, &rope);
#else
  absent(t, OpId::rope, "rope.cu");
#endif
#if MSA_PORTABLE_ROPE_3D
  t.set(OpId::rope_3d, &rope_3d);
#else
  absent(t, OpId::rope_3d, "rope_3d.cu");
#endif
#if MSA_PORTABLE_SWIGLU
  t.set(OpId::swiglu, &swiglu);
#else
  absent(t, OpId::swiglu, "swiglu.cu");
#endif
#if MSA_PORTABLE_GELU
  t.set(OpId::gelu, &gelu);
#else
  absent(t, OpId::gelu, "gelu.cu");
#endif
#if MSA_PORTABLE_ADD
  t.set(OpId::add, &add);
#else
  absent(t, OpId::add, "add.cu");
#endif
#if MSA_PORTABLE_EMBEDDING
  t.set(OpId::embedding, &embedding);
#else
  absent(t, OpId::embedding, "embedding.cu");
#endif
#if MSA_PORTABLE_SCATTER_VISUAL
  t.set(OpId::scatter_visual, &scatter_visual);
#else
  absent(t, OpId::scatter_visual, "scatter_visual.cu");
#endif
#if MSA_PORTABLE_ARGMAX
  t.set(OpId::argmax, &argmax);
#else
  absent(t, OpId::argmax, "argmax.cu");
#endif
#if MSA_PORTABLE_SPARSE_BLOCK_ATTENTION_BACKWARD
  t.set(OpId::sparse_block_attention_backward, &sparse_block_attention_backward);
  t.set_supports(OpId::sparse_block_attention_backward, &training_limits::sparse_backward);
#else
  absent(t, OpId::sparse_block_attention_backward, "sparse_block_attention_backward.cu");
#endif
#if MSA_PORTABLE_DENSE_ATTENTION_BACKWARD
  t.set(OpId::dense_attention_backward, &dense_attention_backward);
  t.set_supports(OpId::dense_attention_backward, &training_limits::dense_backward);
#else
  absent(t, OpId::dense_attention_backward, "dense_attention_backward.cu");
#endif
#if MSA_PORTABLE_PATCH_ATTENTION_3D_BACKWARD
  t.set(OpId::patch_attention_3d_backward, &patch_attention_3d_backward);
  t.set_supports(OpId::patch_attention_3d_backward, &training_limits::patch_backward);
#else
  absent(t, OpId::patch_attention_3d_backward, "patch_attention_3d_backward.cu");
#endif
#if MSA_PORTABLE_INDEXER_KL
  t.set(OpId::indexer_kl, &indexer_kl);
  t.set_supports(OpId::indexer_kl, &training_limits::indexer_kl);
#else
  absent(t, OpId::indexer_kl, "indexer_kl.cu");
#endif
  return t;
}

}  // namespace msa::MSA_GPU_NS
