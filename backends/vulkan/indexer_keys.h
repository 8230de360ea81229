// indexer_score (one workgroup per query block x KV block serving every indexer head,
// shaders/indexer_score.block.comp; or, where the device or shape does not allow it, one
// workgroup per query block x indexer head x KV block, shaders/indexer_score.comp) and
// block_topk (one workgroup per query block x selection head, exact radix select,
// shaders/block_topk.comp). Key caches larger than one binding (or the tuning knob force_bda=1)
// go to indexer_score.block.comp's variant reading them through their device address.
// NVFP4 keys (fp4_e2m1x2 ki_cache with [P][Bs][Di/16] e4m3 ki_scale) have their own
// variants of both shaders (KI_TYPE fp4); indexer_score.block.comp reads them in 8-byte units
// (one group of 16 codes per invocation) instead of 16-byte ones.
// The indexer key layout helpers of indexer_score (indexer_score.cpp).
#pragma once
#include <algorithm>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "ops/args.h"

namespace msa::vulkan {

inline constexpr uint32_t kBlockWgs = 128;  // WGS of indexer_score.block.comp
// One KV block per workgroup up to this many workgroups, then runs of blocks: decode
// (one query per block) gets a grid that grows with the batch and the context. (A fixed
// total of 512 workgroups gives B = 8 at 32K runs of 4 blocks where B = 1 gets single
// blocks in 256, and took 12x as long for 8x the keys at the H200's idle clock.) Prefill, where
// a workgroup scores a block for one query block, still batches blocks to amortise the
// batch lookup. The tuning knob indexer_bpw forces the run length (A/B runs).
inline constexpr uint64_t kBlockMaxGroups = 65536;
inline constexpr uint64_t kBlockMaxRun = 16;  // MAX_BPW of indexer_score.block.comp

inline bool is_nvfp4(const hal::Tensor& ki_cache) { return ki_cache.dtype == hal::DType::fp4_e2m1x2; }

// Bytes of indexer_score.block.comp's key reads (uvec4; uvec2 for NVFP4).
inline uint64_t key_unit(const hal::Tensor& ki_cache) { return is_nvfp4(ki_cache) ? 8 : 16; }

// Bytes of one key row of Di dims.
inline int64_t key_row_bytes(const hal::Tensor& ki_cache, int64_t Di) {
  return is_nvfp4(ki_cache) ? Di / 2 : Di * static_cast<int64_t>(hal::dtype_size(ki_cache.dtype));
}

// "" when indexer_score.block.comp handles this call, else why not.
inline std::string block_unsupported(const ops::IndexerScoreArgs& a) {
  const Caps& caps = device_of(a.qi, "qi").caps();
  if (!caps.subgroup_shuffle || caps.subgroup_size < 8 || caps.subgroup_size > kBlockWgs ||
      kBlockWgs % caps.subgroup_size != 0)
    return "needs subgroup shuffles with a subgroup size of 8 to 128";
  const int64_t Di = a.qi.dim(2), Bs = a.ki_cache.dim(1);
  if (Bs > 128) return "Bs > 128";
  const int64_t row_bytes = key_row_bytes(a.ki_cache, Di);
  const auto unit = static_cast<int64_t>(key_unit(a.ki_cache));
  if (Di <= 0 || Di > 128 || row_bytes % unit != 0) return "Di over 128 or key rows not whole read units";
  if (static_cast<int64_t>(a.ki_cache.offset % unit) != 0) return "ki_cache view not aligned to the read unit";
  if (a.NQ * a.block_score.dim(2) >= (int64_t{1} << 32)) return "NQ * max_blocks >= 2^32";
  return "";
}

}  // namespace msa::vulkan
