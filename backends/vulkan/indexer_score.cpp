// indexer_score: one workgroup per query block x KV block serving every indexer head
// (shaders/indexer_score.block.comp), or, where the device or shape does not allow it, one per
// query block x indexer head x KV block (shaders/indexer_score.comp); see indexer_keys.h.
#include "backends/vulkan/indexer_keys.h"
#include "backends/vulkan/kernels.h"

namespace msa::vulkan {

void indexer_score(hal::Stream& s, const ops::IndexerScoreArgs& a) {
  const char* name = "indexer_score";
  IndexerScorePC pc{};
  const bool blk = block_unsupported(a).empty();
  const bool by_address = blk && use_addresses(device_of(a.qi, "qi"), {&a.ki_cache});
  const std::string variant = tag(a.qi.dtype) + "_" + tag(a.ki_cache.dtype);
  Launch l(s, (blk ? (by_address ? "indexer_score_block_bda_" : "indexer_score_block_") : "indexer_score_") + variant,
           hal::OpId::indexer_score);
  IndexerBlockBdaPC bp{};
  pc.off_qi = l.bind(a.qi, "qi");
  const uint64_t unit = key_unit(a.ki_cache);
  if (by_address) {
    bp.ki_addr = l.bind_address(a.ki_cache, "ki_cache", unit);
    pc.off_ki = 0;
  } else {
    pc.off_ki = l.bind(a.ki_cache, "ki_cache");
    // indexer_score.block.comp reads keys as 16-byte units, NVFP4 keys as 8-byte ones (fp8 and
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
  const uint64_t forced = static_cast<uint64_t>(device_of(a.qi, "qi").settings().indexer_bpw);
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

}  // namespace msa::vulkan
