// sparse_block_attention, dense_attention and patch_attention_3d: one workgroup per
// (query row, head) - or per (row, head, key split) for decode-sized calls - running
// online softmax over tiles of keys (shaders/attention.comp, shaders/attn_combine.comp,
// shaders/patch_attention.comp, shaders/attn_core.glsl).
#include <algorithm>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {
namespace {

constexpr int64_t kMaxD = 256;  // MAX_D of attn_core.glsl

std::string check_head_dim(int64_t D) {
  if (D > kMaxD) return "head dim D = " + std::to_string(D) + " > " + std::to_string(kMaxD);
  return "";
}

// Below this many (token, head) rows a call is split over the key set so that the GPU
// gets at least about this many workgroups (decode: T * Hq = 64 per sequence).
constexpr uint64_t kTargetGroups = 1024;

// Shared by the sparse and dense paths (block_idx absent for dense). Long key sets of
// few rows run as n_split workgroups per row writing f32 partials to the device
// workspace, merged by attn_combine; otherwise one workgroup per row writes out/lse.
template <typename Args>
void paged_attention(hal::Stream& s, const Args& a, const hal::Tensor& block_idx, int Qb, int64_t NQ,
                     bool shared_mode, hal::OpId op) {
  const char* name = hal::op_name(op);
  const bool sparse = block_idx.present();
  VulkanDevice& dev = device_of(a.q, "q");
  AttentionPC pc{};
  pc.T = u32(a.q.dim(0), name, "q");
  pc.Hq = u32(a.q.dim(1), name, "q");
  pc.D = u32(a.q.dim(2), name, "q");
  pc.P = u32(a.k_cache.dim(0), name, "k_cache");
  pc.Hkv = u32(a.k_cache.dim(1), name, "k_cache");
  pc.Bs = u32(a.k_cache.dim(2), name, "k_cache");
  pc.max_blocks = u32(a.block_table.dim(1), name, "block_table");
  pc.B = u32(a.kv_len.dim(0), name, "kv_len");
  pc.Qb = static_cast<uint32_t>(Qb);
  pc.NQ = u32(NQ, name, "NQ");
  pc.k = sparse ? u32(block_idx.dim(2), name, "block_idx") : 0;
  pc.Hs = sparse ? u32(block_idx.dim(1), name, "block_idx") : 0;
  if (sparse && shared_mode) pc.Hs = 1;
  pc.scale = a.scale;

  const uint64_t rows = uint64_t{pc.T} * pc.Hq;
  const uint32_t units = sparse ? pc.k : pc.max_blocks;  // the key set, in split units
  uint32_t n_split = 1;
  if (rows > 0 && rows < kTargetGroups && units > 1)
    n_split = static_cast<uint32_t>(std::min<uint64_t>(units, (kTargetGroups + rows - 1) / rows));
  pc.per_split = n_split > 1 ? (units + n_split - 1) / n_split : units;
  pc.n_split = n_split > 1 ? (units + pc.per_split - 1) / pc.per_split : 1;

  const std::string dt = tag(a.q.dtype);
  const std::string kind = sparse ? "sparse" : "dense";
  auto bind_inputs = [&](Launch& l) {
    pc.off_q = l.bind(a.q, "q");
    pc.off_k = l.bind(a.k_cache, "k_cache");
    pc.off_v = l.bind(a.v_cache, "v_cache");
    pc.off_bt = l.bind(a.block_table, "block_table");
    pc.off_kvlen = l.bind(a.kv_len, "kv_len");
    pc.off_cuq = l.bind(a.cu_q, "cu_q");
    pc.off_idx = l.bind(block_idx, "block_idx");
  };
  if (pc.n_split == 1) {
    Launch l(s, "attention_" + kind + "_" + dt, op);
    bind_inputs(l);
    pc.off_out = l.bind(a.out, "out");
    pc.off_lse = l.bind(a.lse, "lse");
    // At least one workgroup when there are sequences: workgroup 0 validates cu_q/kv_len.
    l.run(pc, std::max<uint64_t>(rows, pc.B > 0 ? 1 : 0));
    return;
  }
  const uint64_t o_bytes = rows * pc.n_split * pc.D * sizeof(float);
  const uint64_t l_bytes = rows * pc.n_split * sizeof(float);
  const uint64_t l_at = (o_bytes + 255) / 256 * 256;  // >= minStorageBufferOffsetAlignment
  Allocation* ws = dev.workspace(l_at + l_bytes);
  {
    Launch l(s, "attention_" + kind + "_split_" + dt, op);
    bind_inputs(l);
    l.bind_raw(ws, o_bytes, 0);
    l.bind_raw(ws, l_bytes, l_at);
    pc.off_out = 0;
    pc.off_lse = 0;
    l.run(pc, rows * pc.n_split);
  }
  AttnCombinePC cp{};
  Launch c(s, "attn_combine_" + dt, op);
  c.bind_raw(ws, o_bytes, 0);
  c.bind_raw(ws, l_bytes, l_at);
  cp.off_out = c.bind(a.out, "out");
  cp.off_lse = c.bind(a.lse, "lse");
  cp.rows = static_cast<uint32_t>(rows);
  cp.S = pc.n_split;
  cp.D = pc.D;
  c.run(cp, rows);
}

template <typename Args>
std::string supports_paged(const Args& a, const hal::Tensor& block_idx) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (std::string why = check_head_dim(a.q.dim(2)); !why.empty()) return why;
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "T * Hq >= 2^32";
  return check_bindable(dev, {&a.q, &a.k_cache, &a.v_cache, &a.block_table, &a.kv_len, &a.cu_q,
                              &block_idx, &a.out, &a.lse});
}

}  // namespace

void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  paged_attention(s, a, a.block_idx, a.Qb, a.NQ, a.mode == ops::SelectionMode::shared,
                  hal::OpId::sparse_block_attention);
}

std::string supports_sparse_block_attention(const ops::SparseAttentionArgs& a) {
  return supports_paged(a, a.block_idx);
}

void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) {
  paged_attention(s, a, hal::Tensor{}, 1, 0, false, hal::OpId::dense_attention);
}

std::string supports_dense_attention(const ops::DenseAttentionArgs& a) {
  return supports_paged(a, hal::Tensor{});
}

void patch_attention_3d(hal::Stream& s, const ops::PatchAttention3dArgs& a) {
  const char* name = "patch_attention_3d";
  PatchAttentionPC pc{};
  Launch l(s, "patch_attention_" + tag(a.q.dtype), hal::OpId::patch_attention_3d);
  pc.off_q = l.bind(a.q, "q");
  pc.off_k = l.bind(a.k, "k");
  pc.off_v = l.bind(a.v, "v");
  pc.off_items = l.bind(a.items, "items");
  pc.off_out = l.bind(a.out, "out");
  pc.off_lse = l.bind(a.lse, "lse");
  pc.N = u32(a.q.dim(0), name, "q");
  pc.H = u32(a.q.dim(1), name, "q");
  pc.D = u32(a.q.dim(2), name, "q");
  pc.n_items = a.items.present() ? u32(a.items.dim(0), name, "items") : 0;
  pc.window = u32(a.window, name, "window");
  pc.scale = a.scale;
  l.run(pc, uint64_t{pc.N} * pc.H);
}

std::string supports_patch_attention_3d(const ops::PatchAttention3dArgs& a) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (std::string why = check_head_dim(a.q.dim(2)); !why.empty()) return why;
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "N * H >= 2^32";
  return check_bindable(dev, {&a.q, &a.k, &a.v, &a.items, &a.out, &a.lse});
}

}  // namespace msa::vulkan
