// sparse_block_attention_backward and dense_attention_backward (docs/training.md), one
// algorithm over the paged cache in f32, deterministic run to run:
//  - the inverse index of the call's selection (block_inverse.h): for each (page, KV
//    head) slab, the block entries that attended it, in row order;
//  - dq: one workgroup per (token, query head) walks its attended set, and writes the
//    row's delta = dot(dout, out) (shaders/paged_attention_backward.dq.comp; it also
//    validates the index data as the forward does, with the same device error flags);
//  - dk_cache / dv_cache: one workgroup per slab sums over its entries' tokens and query
//    heads in that order, no atomics (shaders/paged_attention_backward.dkv.comp).
// The shared part of the two ops (each in <op>.cpp).
#pragma once
#include <algorithm>

#include "backends/vulkan/block_inverse.h"
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "ops/args.h"

namespace msa::vulkan {

inline constexpr int64_t kMaxBackwardD = 256;  // MAX_D of attn_backward.glsl

template <typename Args>
PagedSelection selection_of(const Args& a, const hal::Tensor& block_idx, int Qb, int64_t NQ, bool shared,
                            const char* name) {
  PagedSelection sel;
  sel.block_table = a.block_table, sel.kv_len = a.kv_len, sel.cu_q = a.cu_q, sel.block_idx = block_idx;
  sel.T = u32(a.q.dim(0), name, "q");
  sel.P = u32(a.k_cache.dim(0), name, "k_cache");
  sel.Bs = u32(a.k_cache.dim(2), name, "k_cache");
  sel.max_blocks = u32(a.block_table.dim(1), name, "block_table");
  sel.B = u32(a.kv_len.dim(0), name, "kv_len");
  sel.Qb = u32(Qb, name, "Qb");
  sel.NQ = u32(NQ, name, "NQ");
  if (block_idx.present()) {
    sel.Hs = u32(block_idx.dim(1), name, "block_idx");
    sel.K = u32(block_idx.dim(2), name, "block_idx");
    sel.head_buckets = !shared;  // per_kv_head: each KV head has its own selection
  }
  return sel;
}

// The delta of every (token, query head) row, after the inverse index.
inline uint64_t delta_words(const hal::Tensor& q) { return static_cast<uint64_t>(q.dim(0) * q.dim(1)); }

template <typename Args>
void paged_backward(hal::Stream& s, const Args& a, const hal::Tensor& block_idx, int Qb, int64_t NQ, bool shared,
                    hal::OpId op) {
  const char* name = hal::op_name(op);
  const PagedSelection sel = selection_of(a, block_idx, Qb, NQ, shared, name);
  const BlockInverse inv = build_block_inverse(s, op, sel, delta_words(a.q));
  const std::string dt = tag(a.q.dtype);
  const uint32_t Hq = u32(a.q.dim(1), name, "q"), Hkv = u32(a.k_cache.dim(1), name, "k_cache");
  const uint32_t D = u32(a.q.dim(2), name, "q");
  {
    AttnBackwardDqPC pc{};
    Launch l(s, "paged_attention_backward_dq_" + dt, op);
    pc.off_q = l.bind(a.q, "q");
    pc.off_k = l.bind(a.k_cache, "k_cache");
    pc.off_v = l.bind(a.v_cache, "v_cache");
    pc.off_bt = l.bind(a.block_table, "block_table");
    pc.off_kvlen = l.bind(a.kv_len, "kv_len");
    pc.off_cuq = l.bind(a.cu_q, "cu_q");
    pc.off_idx = l.bind(block_idx, "block_idx");
    pc.off_dout = l.bind(a.dout, "dout");
    pc.off_out = l.bind(a.out, "out");
    pc.off_lse = l.bind(a.lse, "lse");
    pc.off_dq = l.bind(a.dq, "dq");
    l.bind_raw(inv.ws, inv.bytes);
    pc.ws_delta = inv.extra;
    pc.T = sel.T, pc.Hq = Hq, pc.Hkv = Hkv, pc.D = D, pc.P = sel.P, pc.Bs = sel.Bs;
    pc.max_blocks = sel.max_blocks, pc.B = sel.B, pc.Qb = sel.Qb, pc.NQ = sel.NQ, pc.K = sel.K, pc.Hs = sel.Hs;
    pc.sparse = sel.sparse() ? 1 : 0;
    pc.scale = a.scale;
    // At least one workgroup when there are sequences: workgroup 0 validates cu_q/kv_len.
    l.run(pc, std::max<uint64_t>(uint64_t{sel.T} * Hq, sel.B > 0 ? 1 : 0));
  }
  AttnBackwardDkvPC pc{};
  Launch l(s, "paged_attention_backward_dkv_" + dt, op);
  pc.off_q = l.bind(a.q, "q");
  pc.off_k = l.bind(a.k_cache, "k_cache");
  pc.off_v = l.bind(a.v_cache, "v_cache");
  pc.off_idx = l.bind(block_idx, "block_idx");
  pc.off_dout = l.bind(a.dout, "dout");
  pc.off_lse = l.bind(a.lse, "lse");
  l.bind_raw(inv.ws, inv.bytes);
  pc.off_dk = l.bind(a.dk_cache, "dk_cache");
  pc.off_dv = l.bind(a.dv_cache, "dv_cache");
  pc.ws_rows = inv.rows, pc.ws_begin = inv.begin, pc.ws_entry = inv.entry, pc.ws_delta = inv.extra;
  pc.Hq = Hq, pc.Hkv = Hkv, pc.D = D, pc.P = sel.P, pc.Bs = sel.Bs, pc.max_blocks = sel.max_blocks;
  pc.K = sel.K, pc.Hs = sel.Hs, pc.sparse = sel.sparse() ? 1 : 0, pc.head_buckets = sel.head_buckets ? 1 : 0;
  pc.scale = a.scale;
  l.run(pc, uint64_t{sel.P} * Hkv);
}

template <typename Args>
std::string supports_paged_backward(const Args& a, const hal::Tensor& block_idx, int Qb, int64_t NQ, bool shared,
                                    const char* name) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (a.q.dim(2) > kMaxBackwardD)
    return "head dim D = " + std::to_string(a.q.dim(2)) + " > " + std::to_string(kMaxBackwardD);
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "T * Hq >= 2^32";
  if (a.k_cache.dim(0) * a.k_cache.dim(1) >= (int64_t{1} << 32)) return "P * Hkv >= 2^32";
  if (std::string why = check_bindable(dev, {&a.dout, &a.q, &a.k_cache, &a.v_cache, &a.block_table, &a.kv_len, &a.cu_q,
                                             &block_idx, &a.out, &a.lse, &a.dq, &a.dk_cache, &a.dv_cache});
      !why.empty())
    return why;
  return block_inverse_unsupported(dev, selection_of(a, block_idx, Qb, NQ, shared, name), delta_words(a.q));
}

}  // namespace msa::vulkan
