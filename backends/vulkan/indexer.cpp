// indexer_score (one workgroup per query block x indexer head x KV block) and
// block_topk (one workgroup per query block x selection head, exact radix select):
// shaders/indexer_score.comp, shaders/block_topk.comp.
#include <algorithm>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void indexer_score(hal::Stream& s, const ops::IndexerScoreArgs& a) {
  const char* name = "indexer_score";
  IndexerScorePC pc{};
  Launch l(s, "indexer_score_" + tag(a.qi.dtype) + "_" + tag(a.ki_cache.dtype), hal::OpId::indexer_score);
  pc.off_qi = l.bind(a.qi, "qi");
  pc.off_ki = l.bind(a.ki_cache, "ki_cache");
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
  pc.has_scale = a.ki_scale.present() ? 1 : 0;
  pc.pool_lse = a.pool == ops::Pool::lse ? 1 : 0;
  pc.scale = a.scale;
  // At least one workgroup when there are sequences: workgroup 0 validates cu_q/kv_len.
  l.run(pc, std::max<uint64_t>(uint64_t{pc.NQ} * pc.Hi * pc.mb_out, pc.B > 0 ? 1 : 0));
}

std::string supports_indexer_score(const ops::IndexerScoreArgs& a) {
  const VulkanDevice& dev = device_of(a.qi, "qi");
  if (a.qi.dim(2) > 256) return "indexer head dim Di = " + std::to_string(a.qi.dim(2)) + " > 256";
  const hal::DType k = a.ki_cache.dtype;
  if (k != hal::DType::f32 && k != hal::DType::bf16 && k != hal::DType::fp8_e4m3)
    return std::string("ki_cache dtype ") + hal::dtype_name(k) + " has no Vulkan kernel";
  if (a.NQ * a.qi.dim(1) * a.block_score.dim(2) >= (int64_t{1} << 32)) return "NQ * Hi * max_blocks >= 2^32";
  return check_bindable(dev, {&a.qi, &a.ki_cache, &a.ki_scale, &a.block_table, &a.kv_len, &a.cu_q,
                              &a.block_score});
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
