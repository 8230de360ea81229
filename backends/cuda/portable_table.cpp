#include "backends/cuda/portable_table.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/training_limits.h"
#include "msa_portable_ops.h"  // generated: MSA_PORTABLE_OPS(X), one X(<op>) per portable kernel

namespace msa::MSA_GPU_NS {
namespace {

using hal::OpId;

// Attention kernels: head dim up to 128 in 16-byte rows; GQA groups up to 16 heads; the
// layout of shared memory within the vendor's limit.
std::string attention_dims(const VendorLimits& v, int64_t D, int64_t Hq, int64_t Hkv, hal::DType dt) {
  const int64_t per16 = 16 / static_cast<int64_t>(hal::dtype_size(dt));
  if (v.shared_memory_bytes > 0 && v.attention_shared_bytes != nullptr && D <= 128) {
    const int64_t bytes = v.attention_shared_bytes(dt, D);
    if (bytes > v.shared_memory_bytes)
      return "head dim D = " + std::to_string(D) + " in " + hal::dtype_name(dt) + " needs " + std::to_string(bytes) +
             " bytes of shared memory per block; " + v.shared_memory_name;
  }
  if (D > 128)
    return "head dim D = " + std::to_string(D) + " > 128 is not supported by the " MSA_VENDOR_NAME " kernels";
  if (D % per16 != 0)
    return "head dim D = " + std::to_string(D) + " must be a multiple of " + std::to_string(per16) +
           " (16-byte rows) on " MSA_VENDOR_NAME;
  if (Hkv > 0 && Hq / Hkv > 16) return "GQA group G = Hq/Hkv > 16 is not supported by the " MSA_VENDOR_NAME " kernels";
  return "";
}

std::string indexer_dims(const ops::IndexerScoreArgs& a) {
  const int64_t Di = a.qi.dim(2);
  if (Di > 128)
    return "indexer head dim Di = " + std::to_string(Di) + " > 128 is not supported by the " MSA_VENDOR_NAME " kernels";
  if (Di % 16 != 0)
    return "indexer head dim Di = " + std::to_string(Di) + " must be a multiple of 16 on " MSA_VENDOR_NAME;
  // The kernel reads keys in 16-byte chunks (16 fp8 keys): refuse a misaligned view
  // instead of faulting (cases and the caching allocator give 256-byte alignment).
  if (a.ki_cache.present() && reinterpret_cast<uintptr_t>(a.ki_cache.data<char>()) % 16 != 0)
    return "ki_cache must start at a 16-byte aligned address on " MSA_VENDOR_NAME;
  return "";
}

// block_topk keeps a row's keys in shared memory: 4 bytes per block beside ~9 KiB of
// static arrays, under kTopkMaxBlocks and the vendor's shared memory.
int64_t topk_max_blocks(const VendorLimits& v) {
  if (v.shared_memory_bytes <= 0) return kTopkMaxBlocks;
  return std::min<int64_t>(kTopkMaxBlocks, (v.shared_memory_bytes - 9 * 1024) / 4);
}

std::string topk_rows(const VendorLimits& v, const ops::BlockTopkArgs& a) {
  const int64_t limit = topk_max_blocks(v);
  if (a.block_score.dim(2) > limit)
    return "max_blocks = " + std::to_string(a.block_score.dim(2)) + " > " + std::to_string(limit) +
           " is not supported by the " MSA_VENDOR_NAME " block_topk" +
           (limit < kTopkMaxBlocks ? std::string(" (keys must fit in shared memory: ") + v.shared_memory_name + ")"
                                   : std::string());
  return "";
}

}  // namespace

hal::KernelTable make_portable_table(const VendorLimits& limits) {
  hal::KernelTable t;
  std::array<bool, hal::kOpCount> compiled{};
#define MSA_SET_KERNEL(name)                         \
  t.set<ops::ArgsOf<OpId::name>>(OpId::name, &name); \
  compiled[static_cast<int>(OpId::name)] = true;
  MSA_PORTABLE_OPS(MSA_SET_KERNEL)
#undef MSA_SET_KERNEL
  for (int i = 0; i < hal::kKernelOpCount; ++i)
    if (!compiled[i])
      t.set_unsupported(static_cast<OpId>(i),
                        std::string("no portable kernel in this build (backends/cuda/kernels/portable/") +
                            hal::op_name(static_cast<OpId>(i)) + ".cu does not exist yet)");
  // Sizes the kernels do not cover (absent ops keep their reason only).
  const auto covered = [&](OpId op) { return compiled[static_cast<int>(op)]; };
  const VendorLimits v = limits;
  if (covered(OpId::indexer_score)) t.set_supports(OpId::indexer_score, &indexer_dims);
  if (covered(OpId::block_topk))
    t.set_supports<ops::BlockTopkArgs>(OpId::block_topk, [v](const ops::BlockTopkArgs& a) { return topk_rows(v, a); });
  if (covered(OpId::sparse_block_attention))
    t.set_supports<ops::SparseAttentionArgs>(OpId::sparse_block_attention, [v](const ops::SparseAttentionArgs& a) {
      return attention_dims(v, a.q.dim(2), a.q.dim(1), a.k_cache.dim(1), a.q.dtype);
    });
  if (covered(OpId::dense_attention))
    t.set_supports<ops::DenseAttentionArgs>(OpId::dense_attention, [v](const ops::DenseAttentionArgs& a) {
      return attention_dims(v, a.q.dim(2), a.q.dim(1), a.k_cache.dim(1), a.q.dtype);
    });
  if (covered(OpId::patch_attention_3d))
    t.set_supports<ops::PatchAttention3dArgs>(OpId::patch_attention_3d, [v](const ops::PatchAttention3dArgs& a) {
      return attention_dims(v, a.q.dim(2), a.q.dim(1), a.q.dim(1), a.q.dtype);
    });
  if (covered(OpId::sparse_block_attention_backward))
    t.set_supports(OpId::sparse_block_attention_backward, &training_limits::sparse_backward);
  if (covered(OpId::dense_attention_backward))
    t.set_supports(OpId::dense_attention_backward, &training_limits::dense_backward);
  if (covered(OpId::patch_attention_3d_backward))
    t.set_supports(OpId::patch_attention_3d_backward, &training_limits::patch_backward);
  if (covered(OpId::indexer_kl)) t.set_supports(OpId::indexer_kl, &training_limits::indexer_kl);
  return t;
}

}  // namespace msa::MSA_GPU_NS
