// Fills the CUDA backend's kernel table and refuses the sizes its kernels do not cover.
#include <cstdint>
#include <string>

#include "backends/cuda/device.h"
#include "backends/cuda/kernels/indexer_score/decode_mma.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/training_limits.h"

namespace msa::MSA_GPU_NS {
namespace {

using hal::OpId;

// Attention kernels: head dim up to 128 in 16-byte rows; GQA groups up to 16 heads.
std::string attention_dims(int64_t D, int64_t Hq, int64_t Hkv, hal::DType dt) {
  const int64_t per16 = 16 / static_cast<int64_t>(hal::dtype_size(dt));
  if (D > 128) return "head dim D = " + std::to_string(D) + " > 128 is not supported by the cuda kernels";
  if (D % per16 != 0)
    return "head dim D = " + std::to_string(D) + " must be a multiple of " + std::to_string(per16) +
           " (16-byte rows) on cuda";
  if (Hkv > 0 && Hq / Hkv > 16) return "GQA group G = Hq/Hkv > 16 is not supported by the cuda kernels";
  return "";
}

std::string sparse_supports(const ops::SparseAttentionArgs& a) {
  return attention_dims(a.q.dim(2), a.q.dim(1), a.k_cache.dim(1), a.q.dtype);
}
std::string dense_supports(const ops::DenseAttentionArgs& a) {
  return attention_dims(a.q.dim(2), a.q.dim(1), a.k_cache.dim(1), a.q.dtype);
}
std::string patch_supports(const ops::PatchAttention3dArgs& a) {
  return attention_dims(a.q.dim(2), a.q.dim(1), a.q.dim(1), a.q.dtype);
}
std::string indexer_supports(const ops::IndexerScoreArgs& a) {
  const int64_t Di = a.qi.dim(2);
  if (Di > 128) return "indexer head dim Di = " + std::to_string(Di) + " > 128 is not supported by the cuda kernels";
  if (Di % 16 != 0) return "indexer head dim Di = " + std::to_string(Di) + " must be a multiple of 16 on cuda";
  // The kernel reads keys in 16-byte chunks (16 fp8 keys): refuse a misaligned view
  // instead of faulting (cases and the caching allocator give 256-byte alignment).
  if (a.ki_cache.present() && reinterpret_cast<uintptr_t>(a.ki_cache.data<char>()) % 16 != 0)
    return "ki_cache must start at a 16-byte aligned address on cuda";
  return "";
}
std::string topk_supports(const ops::BlockTopkArgs& a) {
  if (a.block_score.dim(2) > kTopkMaxBlocks)
    return "max_blocks = " + std::to_string(a.block_score.dim(2)) + " > " + std::to_string(kTopkMaxBlocks) +
           " is not supported by the cuda block_topk";
  return "";
}

}  // namespace

hal::KernelTable make_kernel_table() {
  hal::KernelTable t;
  t.set(OpId::indexer_score, &indexer_score);
  t.set_supports(OpId::indexer_score, &indexer_supports);
  t.set(OpId::block_topk, &block_topk);
  t.set_supports(OpId::block_topk, &topk_supports);
  t.set_indexer_topk(&launch_mma_decode_indexer_topk);  // decode: the select in the indexer's last block
  t.set(OpId::sparse_block_attention, &sparse_block_attention);
  t.set_supports(OpId::sparse_block_attention, &sparse_supports);
  t.set(OpId::dense_attention, &dense_attention);
  t.set_supports(OpId::dense_attention, &dense_supports);
  t.set(OpId::patch_attention_3d, &patch_attention_3d);
  t.set_supports(OpId::patch_attention_3d, &patch_supports);
  t.set(OpId::kv_append, &kv_append);
  t.set(OpId::matmul, &matmul);
  t.set(OpId::rms_norm, &rms_norm);
  t.set(OpId::layer_norm, &layer_norm);
  t.set(OpId::rope, &rope);
  t.set(OpId::rope_3d, &rope_3d);
  t.set(OpId::swiglu, &swiglu);
  t.set(OpId::gelu, &gelu);
  t.set(OpId::add, &add);
  t.set(OpId::embedding, &embedding);
  t.set(OpId::scatter_visual, &scatter_visual);
  t.set(OpId::argmax, &argmax);
  t.set(OpId::sparse_block_attention_backward, &sparse_block_attention_backward);
  t.set_supports(OpId::sparse_block_attention_backward, &training_limits::sparse_backward);
  t.set(OpId::dense_attention_backward, &dense_attention_backward);
  t.set_supports(OpId::dense_attention_backward, &training_limits::dense_backward);
  t.set(OpId::patch_attention_3d_backward, &patch_attention_3d_backward);
  t.set_supports(OpId::patch_attention_3d_backward, &training_limits::patch_backward);
  t.set(OpId::indexer_kl, &indexer_kl);
  t.set_supports(OpId::indexer_kl, &training_limits::indexer_kl);
  return t;
}

}  // namespace msa::MSA_GPU_NS
