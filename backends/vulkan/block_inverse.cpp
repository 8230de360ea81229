#include "backends/vulkan/block_inverse.h"

#include <algorithm>

#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "backends/vulkan/stream.h"
#include "hal/error.h"

namespace msa::vulkan {
namespace {

constexpr uint64_t kWgs = 128;  // WGS of the block_inverse shaders

}  // namespace

BlockInverse block_inverse_layout(const PagedSelection& sel, uint64_t extra_words) {
  BlockInverse inv;
  uint64_t at = 0;
  auto part = [&](uint32_t& off, uint64_t words) {
    off = static_cast<uint32_t>(std::min<uint64_t>(at, 0xffffffffu));
    at += words;
  };
  part(inv.rows, sel.rows() * 4);
  part(inv.bucket, sel.entries());
  part(inv.count, sel.buckets());
  part(inv.begin, sel.buckets() + 1);
  part(inv.entry, sel.entries());
  part(inv.extra, extra_words);
  inv.bytes = at * 4;
  return inv;
}

std::string block_inverse_unsupported(const VulkanDevice& dev, const PagedSelection& sel, uint64_t extra_words) {
  const BlockInverse inv = block_inverse_layout(sel, extra_words);
  if (inv.bytes / 4 >= (uint64_t{1} << 32) || inv.bytes > dev.caps().max_storage_range)
    return "the training kernels' workspace (inverse index of " + std::to_string(sel.entries()) +
           " selection entries over " + std::to_string(sel.buckets()) + " buckets) needs " + std::to_string(inv.bytes) +
           " bytes, more than this device's maxStorageBufferRange of " + std::to_string(dev.caps().max_storage_range);
  return "";
}

BlockInverse build_block_inverse(hal::Stream& s, hal::OpId op, const PagedSelection& sel, uint64_t extra_words) {
  VulkanDevice& dev = static_cast<VulkanStream&>(s).device();
  if (std::string why = block_inverse_unsupported(dev, sel, extra_words); !why.empty())
    throw Error(std::string(hal::op_name(op)) + ": " + why);
  BlockInverse inv = block_inverse_layout(sel, extra_words);
  inv.ws = dev.workspace(inv.bytes);
  const uint32_t n_buckets = static_cast<uint32_t>(sel.buckets());
  const uint32_t n_entries = static_cast<uint32_t>(sel.entries());
  if (n_buckets > 0) {  // counts start at 0
    auto& vs = static_cast<VulkanStream&>(s);
    VkCommandBuffer cmd = vs.begin_command();
    vkCmdFillBuffer(cmd, inv.ws->buffer, uint64_t{inv.count} * 4, uint64_t{n_buckets} * 4, 0);
    vs.end_command();
  }
  {
    BlockInverseCountPC pc{};
    Launch l(s, "block_inverse_count", op);
    pc.off_bt = l.bind(sel.block_table, "block_table");
    pc.off_kvlen = l.bind(sel.kv_len, "kv_len");
    pc.off_cuq = l.bind(sel.cu_q, "cu_q");
    pc.off_idx = l.bind(sel.block_idx, "block_idx");
    l.bind_raw(inv.ws, inv.bytes);
    pc.T = sel.T, pc.B = sel.B, pc.P = sel.P, pc.Bs = sel.Bs, pc.max_blocks = sel.max_blocks;
    pc.Qb = sel.Qb, pc.NQ = sel.NQ, pc.Hs = sel.Hs, pc.K = sel.K;
    pc.sparse = sel.sparse() ? 1 : 0;
    pc.head_buckets = sel.head_buckets ? 1 : 0;
    pc.ws_rows = inv.rows, pc.ws_bucket = inv.bucket, pc.ws_count = inv.count;
    l.run(pc, sel.rows());
  }
  {
    Launch l(s, "block_inverse_scan", op);
    l.bind_raw(inv.ws, inv.bytes);
    l.run(BlockInverseScanPC{n_buckets, inv.count, inv.begin}, 1);
  }
  {
    Launch l(s, "block_inverse_fill", op);
    l.bind_raw(inv.ws, inv.bytes);
    l.run(BlockInverseFillPC{n_entries, inv.bucket, inv.count, inv.begin, inv.entry}, (n_entries + kWgs - 1) / kWgs);
  }
  {
    Launch l(s, "block_inverse_sort", op);
    l.bind_raw(inv.ws, inv.bytes);
    l.run(BlockInverseSortPC{n_buckets, inv.begin, inv.entry}, n_buckets);
  }
  return inv;
}

}  // namespace msa::vulkan
