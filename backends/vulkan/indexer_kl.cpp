// indexer_kl (docs/training.md), stages sparse and dense, in f32, deterministic run to
// run:
//  - the inverse index of the call's selection (block_inverse.h): for each page, the
//    block entries that attended it, in row order;
//  - kl, dqi: one workgroup per (token, selection head) walks its token set twice (the
//    student's max and sum, then kl and dqi) and writes those to the workspace
//    (shaders/indexer_kl.comp; it also validates the index data as the forward attention
//    does, with the same device error flags);
//  - dki_cache: one workgroup per page sums over its entries' tokens and heads in that
//    order, no atomics (shaders/indexer_kl.dki.comp).
#include <algorithm>

#include "backends/vulkan/block_inverse.h"
#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {
namespace {

constexpr const char* kName = "indexer_kl";
constexpr int64_t kMaxDi = 256;  // MAX_DI of indexer_kl.glsl

bool sparse_stage(const ops::IndexerKlArgs& a) { return a.stage == ops::KlStage::sparse; }

// Buckets are pages: dki_cache has no head dim, so every selection head's entries of a
// page add into the same slab.
PagedSelection selection_of(const ops::IndexerKlArgs& a) {
  PagedSelection sel;
  sel.block_table = a.block_table, sel.kv_len = a.kv_len, sel.cu_q = a.cu_q;
  sel.T = u32(a.q.dim(0), kName, "q");
  sel.P = u32(a.k_cache.dim(0), kName, "k_cache");
  sel.Bs = u32(a.k_cache.dim(2), kName, "k_cache");
  sel.max_blocks = u32(a.block_table.dim(1), kName, "block_table");
  sel.B = u32(a.kv_len.dim(0), kName, "kv_len");
  if (sparse_stage(a)) {
    sel.block_idx = a.block_idx;
    sel.Qb = u32(a.Qb, kName, "Qb");
    sel.NQ = u32(a.NQ, kName, "NQ");
    sel.Hs = u32(a.block_idx.dim(1), kName, "block_idx");
    sel.K = u32(a.block_idx.dim(2), kName, "block_idx");
  }
  return sel;
}

// The student's max and sum of every (token, selection head) row, after the inverse index.
uint64_t lse_u_words(const ops::IndexerKlArgs& a) { return 2 * static_cast<uint64_t>(a.qi.dim(0) * a.qi.dim(1)); }

}  // namespace

void indexer_kl(hal::Stream& s, const ops::IndexerKlArgs& a) {
  const hal::OpId op = hal::OpId::indexer_kl;
  const PagedSelection sel = selection_of(a);
  const BlockInverse inv = build_block_inverse(s, op, sel, lse_u_words(a));
  const std::string variant = tag(a.qi.dtype) + "_" + tag(a.ki_cache.dtype) + "_" + tag(a.q.dtype);
  const uint32_t Hq = u32(a.q.dim(1), kName, "q"), Hkv = u32(a.k_cache.dim(1), kName, "k_cache");
  const uint32_t D = u32(a.q.dim(2), kName, "q"), Hs = u32(a.qi.dim(1), kName, "qi");
  const uint32_t Di = u32(a.qi.dim(2), kName, "qi");
  {
    IndexerKlPC pc{};
    Launch l(s, "indexer_kl_" + variant, op);
    pc.off_qi = l.bind(a.qi, "qi");
    pc.off_ki = l.bind(a.ki_cache, "ki_cache");
    pc.off_q = l.bind(a.q, "q");
    pc.off_k = l.bind(a.k_cache, "k_cache");
    pc.off_lse = l.bind(a.lse, "lse");
    pc.off_bt = l.bind(a.block_table, "block_table");
    pc.off_kvlen = l.bind(a.kv_len, "kv_len");
    pc.off_cuq = l.bind(a.cu_q, "cu_q");
    pc.off_idx = l.bind(sel.block_idx, "block_idx");
    pc.off_dkl = l.bind(a.dkl, "dkl");
    pc.off_kl = l.bind(a.kl, "kl");
    pc.off_dqi = l.bind(a.dqi, "dqi");
    l.bind_raw(inv.ws, inv.bytes);
    pc.ws_lse_u = inv.extra;
    pc.T = sel.T, pc.Hq = Hq, pc.Hkv = Hkv, pc.D = D, pc.P = sel.P, pc.Bs = sel.Bs;
    pc.max_blocks = sel.max_blocks, pc.B = sel.B, pc.Qb = sel.Qb, pc.NQ = sel.NQ, pc.K = sel.K;
    pc.Hs = Hs, pc.Di = Di, pc.sparse = sel.sparse() ? 1 : 0, pc.has_dkl = a.dkl.present() ? 1 : 0;
    pc.scale = a.scale, pc.scale_i = a.scale_i;
    // At least one workgroup when there are sequences: workgroup 0 validates cu_q/kv_len.
    l.run(pc, std::max<uint64_t>(uint64_t{sel.T} * Hs, sel.B > 0 ? 1 : 0));
  }
  IndexerKlDkiPC pc{};
  Launch l(s, "indexer_kl_dki_" + variant, op);
  pc.off_qi = l.bind(a.qi, "qi");
  pc.off_ki = l.bind(a.ki_cache, "ki_cache");
  pc.off_q = l.bind(a.q, "q");
  pc.off_k = l.bind(a.k_cache, "k_cache");
  pc.off_lse = l.bind(a.lse, "lse");
  pc.off_idx = l.bind(sel.block_idx, "block_idx");
  pc.off_dkl = l.bind(a.dkl, "dkl");
  l.bind_raw(inv.ws, inv.bytes);
  pc.off_dki = l.bind(a.dki_cache, "dki_cache");
  pc.ws_rows = inv.rows, pc.ws_begin = inv.begin, pc.ws_entry = inv.entry, pc.ws_lse_u = inv.extra;
  pc.Hq = Hq, pc.Hkv = Hkv, pc.D = D, pc.P = sel.P, pc.Bs = sel.Bs, pc.max_blocks = sel.max_blocks;
  pc.K = sel.K, pc.Hs = Hs, pc.Di = Di, pc.sparse = sel.sparse() ? 1 : 0, pc.has_dkl = a.dkl.present() ? 1 : 0;
  pc.scale = a.scale, pc.scale_i = a.scale_i;
  l.run(pc, sel.P);
}

std::string supports_indexer_kl(const ops::IndexerKlArgs& a) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (a.qi.dim(2) > kMaxDi)
    return "indexer head dim Di = " + std::to_string(a.qi.dim(2)) + " > " + std::to_string(kMaxDi);
  const hal::DType k = a.ki_cache.dtype;
  if (k != hal::DType::f32 && k != hal::DType::bf16)
    return std::string("ki_cache dtype ") + hal::dtype_name(k) + " has no Vulkan indexer_kl kernel";
  if (a.qi.dim(0) * a.qi.dim(1) >= (int64_t{1} << 32)) return "T * Hs >= 2^32";
  if (std::string why = check_bindable(dev, {&a.qi, &a.ki_cache, &a.q, &a.k_cache, &a.lse, &a.block_table, &a.kv_len,
                                             &a.cu_q, &a.block_idx, &a.dkl, &a.kl, &a.dqi, &a.dki_cache});
      !why.empty())
    return why;
  return block_inverse_unsupported(dev, selection_of(a), lse_u_words(a));
}

}  // namespace msa::vulkan
