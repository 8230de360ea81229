// indexer_score (one workgroup per query block x KV block serving every indexer head,
// shaders/indexer_block.comp; or, where the device or shape does not allow it, one
// workgroup per query block x indexer head x KV block, shaders/indexer_score.comp) and
// block_topk (one workgroup per query block x selection head, exact radix select,
// shaders/block_topk.comp). Key caches larger than one binding (or MSA_VK_FORCE_BDA=1)
// go to indexer_block.comp's variant reading them through their device address.
// NVFP4 keys (fp4_e2m1x2 ki_cache with [P][Bs][Di/16] e4m3 ki_scale) have their own
// variants of both shaders (KI_TYPE fp4); indexer_block.comp reads them in 8-byte units
// (one group of 16 codes per invocation) instead of 16-byte ones.
#include <algorithm>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

namespace {

constexpr uint32_t kBlockWgs = 128;  // WGS of indexer_block.comp
// One KV block per workgroup up to this many workgroups, then runs of blocks: decode
// (one query per block) gets a grid that grows with the batch and the context. (A fixed
// total of 512 workgroups gives B = 8 at 32K runs of 4 blocks where B = 1 gets single
// blocks in 256, and took 12x as long for 8x the keys at the H200's idle clock.) Prefill, where
// a workgroup scores a block for one query block, still batches blocks to amortise the
// batch lookup. MSA_VK_INDEXER_BPW forces the run length (A/B runs).
constexpr uint64_t kBlockMaxGroups = 65536;
constexpr uint64_t kBlockMaxRun = 16;  // MAX_BPW of indexer_block.comp

bool is_nvfp4(const hal::Tensor& ki_cache) { return ki_cache.dtype == hal::DType::fp4_e2m1x2; }

// Bytes of indexer_block.comp's key reads (uvec4; uvec2 for NVFP4).
uint64_t key_unit(const hal::Tensor& ki_cache) { return is_nvfp4(ki_cache) ? 8 : 16; }

// Bytes of one key row of Di dims.
int64_t key_row_bytes(const hal::Tensor& ki_cache, int64_t Di) {
  return is_nvfp4(ki_cache) ? Di / 2 : Di * static_cast<int64_t>(hal::dtype_size(ki_cache.dtype));
}

// "" when indexer_block.comp handles this call, else why not.
std::string block_unsupported(const ops::IndexerScoreArgs& a) {
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

}  // namespace

void indexer_score(hal::Stream& s, const ops::IndexerScoreArgs& a) {
  const char* name = "indexer_score";
  IndexerScorePC pc{};
  const bool blk = block_unsupported(a).empty();
  const bool by_address = blk && use_addresses(device_of(a.qi, "qi"), {&a.ki_cache});
  const std::string variant = tag(a.qi.dtype) + "_" + tag(a.ki_cache.dtype);
  Launch l(s, (blk ? (by_address ? "indexer_block_bda_" : "indexer_block_") : "indexer_score_") + variant,
           hal::OpId::indexer_score);
  IndexerBlockBdaPC bp{};
  pc.off_qi = l.bind(a.qi, "qi");
  const uint64_t unit = key_unit(a.ki_cache);
  if (by_address) {
    bp.ki_addr = l.bind_address(a.ki_cache, "ki_cache", unit);
    pc.off_ki = 0;
  } else {
    pc.off_ki = l.bind(a.ki_cache, "ki_cache");
    // indexer_block.comp reads keys as 16-byte units, NVFP4 keys as 8-byte ones (fp8 and
    // fp4 offsets are in bytes).
    if (blk) pc.off_ki = static_cast<uint32_t>(pc.off_ki * hal::dtype_size(a.ki_cache.dtype) / unit);
  }
  pc.off_kis = l.bind(a.ki_scale, "ki_scale");
  pc.off_bt = l.bind(a.block_table, "block_table");
  pc.off_kvlen = l.bind(a.kv_len, "kv_len");
  pc.off_cuq = l.bind(a.cu_q, "cu_q");
  pc.off_out = l.bind(a.block_score, "block_score");
  pc.T = u32(a.qi.dim(0), name, "qi");
  pc.Hi = u32(a.qi.dim(1), name, "qi");
  pc.Di = u32(a.qi.dim(2), name, "qi");
  pc.P = u32(a.ki_cache.dim(0), name, "ki_cache");
  pc.Bs = u32(a.ki_cache.dim(1), name, "ki_cache");
  pc.mb_table = u32(a.block_table.dim(1), name, "block_table");
  pc.mb_out = u32(a.block_score.dim(2), name, "block_score");
  pc.B = u32(a.kv_len.dim(0), name, "kv_len");
  pc.Qb = u32(a.Qb, name, "Qb");
  pc.NQ = u32(a.NQ, name, "NQ");
  pc.has_scale = a.ki_scale.present() && !is_nvfp4(a.ki_cache) ? 1 : 0;  // the f32 per-token scale
  pc.pool_lse = a.pool == ops::Pool::lse ? 1 : 0;
  pc.scale = a.scale;
  // At least one workgroup when there are sequences: workgroup 0 validates cu_q/kv_len.
  const uint64_t min_groups = pc.B > 0 ? 1 : 0;
  if (!blk) {
    l.run(pc, std::max<uint64_t>(uint64_t{pc.NQ} * pc.Hi * pc.mb_out, min_groups));
    return;
  }
  // Runs of bpw KV blocks per workgroup (see kBlockMaxGroups).
  bp.p.base = pc;
  const uint64_t blocks = uint64_t{pc.NQ} * pc.mb_out;
  const uint64_t forced = env_knob("MSA_VK_INDEXER_BPW", 0);
  bp.p.bpw = static_cast<uint32_t>(
      std::clamp<uint64_t>(forced > 0 ? forced : (blocks + kBlockMaxGroups - 1) / kBlockMaxGroups, 1, kBlockMaxRun));
  const uint64_t runs = (uint64_t{pc.mb_out} + bp.p.bpw - 1) / bp.p.bpw;
  const uint64_t groups = std::max<uint64_t>(uint64_t{pc.NQ} * runs, min_groups);
  if (by_address)
    l.run(bp, groups);
  else
    l.run(bp.p, groups);
}

std::string supports_indexer_score(const ops::IndexerScoreArgs& a) {
  const VulkanDevice& dev = device_of(a.qi, "qi");
  if (a.qi.dim(2) > 256) return "indexer head dim Di = " + std::to_string(a.qi.dim(2)) + " > 256";
  const hal::DType k = a.ki_cache.dtype;
  if (k != hal::DType::f32 && k != hal::DType::bf16 && k != hal::DType::fp8_e4m3 && k != hal::DType::fp4_e2m1x2)
    return std::string("ki_cache dtype ") + hal::dtype_name(k) + " has no Vulkan kernel";
  if (a.NQ * a.qi.dim(1) * a.block_score.dim(2) >= (int64_t{1} << 32)) return "NQ * Hi * max_blocks >= 2^32";
  if (block_unsupported(a).empty() && use_addresses(dev, {&a.ki_cache})) {
    if (std::string why = check_addressable(dev, a.ki_cache, key_unit(a.ki_cache)); !why.empty()) return why;
    return check_bindable(dev, {&a.qi, &a.ki_scale, &a.block_table, &a.kv_len, &a.cu_q, &a.block_score});
  }
  return check_bindable(dev, {&a.qi, &a.ki_cache, &a.ki_scale, &a.block_table, &a.kv_len, &a.cu_q, &a.block_score});
}

void block_topk(hal::Stream& s, const ops::BlockTopkArgs& a) {
  const char* name = "block_topk";
  BlockTopkPC pc{};
  Launch l(s, "block_topk", hal::OpId::block_topk);
  pc.off_score = l.bind(a.block_score, "block_score");
  pc.off_kvlen = l.bind(a.kv_len, "kv_len");
  pc.off_cuq = l.bind(a.cu_q, "cu_q");
  pc.off_idx = l.bind(a.block_idx, "block_idx");
  pc.off_cnt = l.bind(a.block_cnt, "block_cnt");
  pc.B = u32(a.kv_len.dim(0), name, "kv_len");
  pc.Hs = u32(a.block_score.dim(1), name, "block_score");
  pc.MB = u32(a.block_score.dim(2), name, "block_score");
  pc.Qb = u32(a.Qb, name, "Qb");
  pc.NQ = u32(a.NQ, name, "NQ");
  pc.Bs = u32(a.Bs, name, "Bs");
  pc.k = u32(a.k, name, "k");
  pc.n_sink = u32(a.n_sink, name, "n_sink");
  pc.n_local = u32(a.n_local, name, "n_local");
  l.run(pc, std::max<uint64_t>(uint64_t{pc.NQ} * pc.Hs, pc.B > 0 ? 1 : 0));
}

std::string supports_block_topk(const ops::BlockTopkArgs& a) {
  const VulkanDevice& dev = device_of(a.block_score, "block_score");
  if (a.block_score.dim(2) * a.Bs >= (int64_t{1} << 31)) return "max_blocks * Bs >= 2^31";
  return check_bindable(dev, {&a.block_score, &a.kv_len, &a.cu_q, &a.block_idx, &a.block_cnt});
}

}  // namespace msa::vulkan
