// block_topk: one workgroup per query block x selection head, exact radix select
// (shaders/block_topk.comp).
#include "backends/vulkan/indexer_keys.h"
#include "backends/vulkan/kernels.h"

namespace msa::vulkan {

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
