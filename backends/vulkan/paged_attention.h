// sparse_block_attention, dense_attention and patch_attention_3d: one workgroup per
// (query row, head) - or per (row, head, key split) for decode-sized calls - running
// online softmax over tiles of keys (shaders/paged_attention.comp, shaders/paged_attention.combine.comp,
// shaders/patch_attention_3d.comp, shaders/attn_core.glsl). Sparse attention with Qb = 1
// (decode) takes the GQA path where the device allows it: one workgroup per (token, KV
// head, split of the selected tiles) serving the whole query-head group
// (shaders/paged_attention.gqa.comp), merged by paged_attention.combine; dense attention
// takes the same kernel over every visible block. K/V caches larger than one
// storage-buffer binding (maxStorageBufferRange: 4 GiB on NVIDIA; B = 8 at 1M is 8 GiB
// each) go to the GQA kernel's variant that reads them through buffer device addresses;
// other paths refuse them.
// The shared host side of the forward attention ops (sparse_block_attention,
// dense_attention, patch_attention_3d, each in <op>.cpp).
#pragma once
#include <algorithm>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "ops/args.h"

namespace msa::vulkan {

inline constexpr int64_t kMaxD = 256;  // MAX_D of attn_core.glsl

inline std::string check_head_dim(int64_t D) {
  if (D > kMaxD) return "head dim D = " + std::to_string(D) + " > " + std::to_string(kMaxD);
  return "";
}

// Below this many (token, head) rows a call is split over the key set so that the GPU
// gets at least about this many workgroups (decode: T * Hq = 64 per sequence).
inline constexpr uint64_t kTargetGroups = 1024;

// The sizes every paged-attention kernel's push constants share, and the scale.
template <typename PC, typename Args>
void set_paged_shape(PC& pc, const Args& a, const char* name) {
  pc.T = u32(a.q.dim(0), name, "q");
  pc.Hq = u32(a.q.dim(1), name, "q");
  pc.D = u32(a.q.dim(2), name, "q");
  pc.P = u32(a.k_cache.dim(0), name, "k_cache");
  pc.Hkv = u32(a.k_cache.dim(1), name, "k_cache");
  pc.Bs = u32(a.k_cache.dim(2), name, "k_cache");
  pc.max_blocks = u32(a.block_table.dim(1), name, "block_table");
  pc.B = u32(a.kv_len.dim(0), name, "kv_len");
  pc.scale = a.scale;
}

// Binds the paged-attention inputs (bindings 1..7) and sets their element offsets; with
// `kv_addr`, K and V are passed by device address instead (kv_addr[0], [1]).
template <typename PC, typename Args>
void bind_paged(Launch& l, PC& pc, const Args& a, const hal::Tensor& block_idx, uint64_t* kv_addr = nullptr) {
  pc.off_q = l.bind(a.q, "q");
  if (kv_addr != nullptr) {
    kv_addr[0] = l.bind_address(a.k_cache, "k_cache", 16);
    kv_addr[1] = l.bind_address(a.v_cache, "v_cache", 16);
    pc.off_k = pc.off_v = 0;
  } else {
    pc.off_k = l.bind(a.k_cache, "k_cache");
    pc.off_v = l.bind(a.v_cache, "v_cache");
  }
  pc.off_bt = l.bind(a.block_table, "block_table");
  pc.off_kvlen = l.bind(a.kv_len, "kv_len");
  pc.off_cuq = l.bind(a.cu_q, "cu_q");
  pc.off_idx = l.bind(block_idx, "block_idx");
}

// The fields every attention kernel's push constants share (off_out, off_lse ...).
inline AttentionPC& fields(AttentionPC& p) { return p; }
inline AttnGqaPC& fields(AttnGqaPC& p) { return p; }
inline AttnGqaPC& fields(AttnGqaBdaPC& p) { return p.p; }

// Records attention kernel `<prefix>_<dt>` over `groups` workgroups writing out / lse
// (n_split == 1), or `<prefix>_split_<dt>` over groups * n_split workgroups writing f32
// partials ([rows][n_split][D]) and their LSE to the device workspace, merged by
// paged_attention.combine in fixed split order. `bind_inputs` binds the kernel's inputs (bindings
// 1..7); the kernel's push constants `pc` have off_out / off_lse.
template <typename Args, typename PC, typename Bind>
void run_attention(hal::Stream& s, const Args& a, const std::string& prefix, PC& pc, const Bind& bind_inputs,
                   uint64_t rows, uint64_t groups, uint32_t n_split, uint32_t D, uint32_t B, hal::OpId op) {
  const std::string dt = tag(a.q.dtype);
  if (n_split == 1) {
    Launch l(s, prefix + "_" + dt, op);
    bind_inputs(l);
    fields(pc).off_out = l.bind(a.out, "out");
    fields(pc).off_lse = l.bind(a.lse, "lse");
    // At least one workgroup when there are sequences: workgroup 0 validates cu_q/kv_len.
    l.run(pc, std::max<uint64_t>(groups, B > 0 ? 1 : 0));
    return;
  }
  const uint64_t o_bytes = rows * n_split * D * sizeof(float);
  const uint64_t l_bytes = rows * n_split * sizeof(float);
  const uint64_t l_at = (o_bytes + 255) / 256 * 256;  // >= minStorageBufferOffsetAlignment
  Allocation* ws = device_of(a.q, "q").workspace(l_at + l_bytes);
  {
    Launch l(s, prefix + "_split_" + dt, op);
    bind_inputs(l);
    l.bind_raw(ws, o_bytes, 0);
    l.bind_raw(ws, l_bytes, l_at);
    fields(pc).off_out = 0;
    fields(pc).off_lse = 0;
    l.run(pc, groups * n_split);
  }
  AttnCombinePC cp{};
  Launch c(s, "paged_attention_combine_" + dt, op);
  c.bind_raw(ws, o_bytes, 0);
  c.bind_raw(ws, l_bytes, l_at);
  cp.off_out = c.bind(a.out, "out");
  cp.off_lse = c.bind(a.lse, "lse");
  cp.rows = static_cast<uint32_t>(rows);
  cp.S = n_split;
  cp.D = D;
  c.run(cp, rows);
}

// ---- GQA path of sparse_block_attention (shaders/paged_attention.gqa.comp) ----------------
inline constexpr uint32_t kGqaWgs = 128;          // WGS of paged_attention.gqa.comp
inline constexpr uint32_t kGqaRows = 16;          // ROWS: largest G
inline constexpr uint32_t kGqaShared = 32 << 10;  // shared memory it needs, rounded up
// Split-KV for decode-sized calls: each workgroup takes gqa_units (tuning.h: 2) tiles (64 keys at 16-bit
// types), so a larger batch gets more workgroups, not longer ones: a decode workgroup's
// time is its chain of dependent loads and barriers, and the GPU runs many at once. (A
// fixed total of 512 workgroups would give B = 8 4 tiles per workgroup where B = 1 gets
// 2 in 128: twice the chain, and a call time that grows with the batch.)
// Splits only grow past gqa_groups (8192) workgroups (large batches, prefill). Dense calls
// stop at gqa_dense_groups (2048): their key sets are long, so a split is long enough
// anyway, and each split adds a partial for paged_attention.combine to read.

inline uint32_t gqa_tile_keys(hal::DType t) { return t == hal::DType::f32 ? 16 : 32; }  // TK

// "" when the device and the shape suit the GQA kernel (G <= 16, D % 8 == 0, D <= 128,
// subgroup shuffles, 32 KiB of shared memory, 16-byte aligned K/V views), else why not.
template <typename Args>
std::string gqa_shape_unsupported(const Args& a) {
  const Caps& caps = device_of(a.q, "q").caps();
  const int64_t Hq = a.q.dim(1), Hkv = a.k_cache.dim(1), D = a.q.dim(2);
  if (Hkv <= 0 || Hq % Hkv != 0 || Hq / Hkv > kGqaRows) return "G > 16";
  if (D <= 0 || D % 8 != 0 || D > 128) return "D not a multiple of 8 up to 128";
  if (!caps.subgroup_shuffle || caps.subgroup_size < 8 || caps.subgroup_size > kGqaWgs ||
      kGqaWgs % caps.subgroup_size != 0)
    return "needs subgroup shuffles with a subgroup size of 8 to 128";
  if (caps.max_shared < kGqaShared) return "needs 32 KiB of shared memory";
  if (a.k_cache.offset % 16 != 0 || a.v_cache.offset % 16 != 0) return "K/V views not 16-byte aligned";
  return "";
}

// "" when the GQA kernel handles this sparse call, else why not (then paged_attention.comp runs it).
inline std::string gqa_unsupported(const ops::SparseAttentionArgs& a) {
  if (a.Qb != 1) return "Qb > 1";
  return gqa_shape_unsupported(a);
}

// "" when the GQA kernel handles this dense call: every shape it suits, prefill too (each
// token's workgroups read its visible blocks once for the whole query-head group);
// --tuning gqa_dense=0 sends dense calls to paged_attention.comp.
inline std::string gqa_unsupported(const ops::DenseAttentionArgs& a) {
  if (device_of(a.q, "q").settings().gqa_dense == 0) return "gqa_dense=0";
  return gqa_shape_unsupported(a);
}

// Whether the GQA kernel takes K/V by device address (caches past one binding, or forced).
template <typename Args>
bool gqa_by_address(const Args& a) {
  return use_addresses(device_of(a.q, "q"), {&a.k_cache, &a.v_cache});
}

// The GQA kernel over the selection `block_idx` ([NQ][Hs][k]), or with block_idx absent
// (dense_attention) over every block of each token's sequence up to its causal limit:
// entry e is logical block e, k = max_blocks.
template <typename Args>
void gqa_attention(hal::Stream& s, const Args& a, const hal::Tensor& block_idx, int64_t NQ, bool shared_mode,
                   hal::OpId op) {
  const char* name = hal::op_name(op);
  const bool dense = !block_idx.present();
  const bool by_address = gqa_by_address(a);
  AttnGqaBdaPC bpc{};
  AttnGqaPC& pc = bpc.p;
  set_paged_shape(pc, a, name);
  pc.G = pc.Hq / pc.Hkv;
  pc.dense = dense ? 1 : 0;
  pc.NQ = dense ? pc.T : u32(NQ, name, "NQ");
  pc.k = dense ? pc.max_blocks : u32(block_idx.dim(2), name, "block_idx");
  pc.Hs = dense || shared_mode ? 1 : u32(block_idx.dim(1), name, "block_idx");
  const uint32_t tk = gqa_tile_keys(a.q.dtype);
  pc.tpb = (pc.Bs + tk - 1) / tk;
  const uint32_t units = u32(uint64_t{pc.k} * pc.tpb, name, "block_table");
  const uint64_t base = uint64_t{pc.T} * pc.Hkv;  // workgroups without a split
  const Tuning& tuning = device_of(a.q, "q").settings();
  const uint32_t per = static_cast<uint32_t>(tuning.gqa_units);
  const uint64_t max_groups = static_cast<uint64_t>(dense ? tuning.gqa_dense_groups : tuning.gqa_groups);
  uint32_t n_split = 1;
  if (base > 0 && base < max_groups && units > per)
    n_split = static_cast<uint32_t>(std::min<uint64_t>((max_groups + base - 1) / base, (units + per - 1) / per));
  pc.per_split = (units + n_split - 1) / n_split;
  pc.n_split = pc.per_split > 0 ? (units + pc.per_split - 1) / pc.per_split : 1;

  const uint32_t esize = static_cast<uint32_t>(hal::dtype_size(a.q.dtype));
  auto bind_inputs = [&](Launch& l) {
    if (by_address) {
      uint64_t kv[2];
      bind_paged(l, pc, a, block_idx, kv);
      bpc.k_addr = kv[0];
      bpc.v_addr = kv[1];
      return;
    }
    bind_paged(l, pc, a, block_idx);
    pc.off_k = pc.off_k * esize / 16;  // K and V as uvec4: 16-byte aligned (gqa_shape_unsupported)
    pc.off_v = pc.off_v * esize / 16;
  };
  const uint64_t rows = uint64_t{pc.T} * pc.Hq;
  if (by_address)
    run_attention(s, a, "paged_attention_gqa_bda", bpc, bind_inputs, rows, base, pc.n_split, pc.D, pc.B, op);
  else
    run_attention(s, a, "paged_attention_gqa", pc, bind_inputs, rows, base, pc.n_split, pc.D, pc.B, op);
}

// supports() of a call the GQA kernel takes with K/V by device address: the caches must be
// addressable, the other tensors bindable.
template <typename Args>
std::string supports_gqa_by_address(const Args& a, const hal::Tensor& block_idx) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (std::string why = check_head_dim(a.q.dim(2)); !why.empty()) return why;
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "T * Hq >= 2^32";
  for (const hal::Tensor* kv : {&a.k_cache, &a.v_cache})
    if (std::string why = check_addressable(dev, *kv, 16); !why.empty()) return why;
  return check_bindable(dev, {&a.q, &a.block_table, &a.kv_len, &a.cu_q, &block_idx, &a.out, &a.lse});
}

// Shared by the sparse and dense paths (block_idx absent for dense). Long key sets of
// few rows run as n_split workgroups per row writing f32 partials to the device
// workspace, merged by paged_attention.combine; otherwise one workgroup per row writes out/lse.
template <typename Args>
void paged_attention(hal::Stream& s, const Args& a, const hal::Tensor& block_idx, int Qb, int64_t NQ, bool shared_mode,
                     hal::OpId op) {
  const char* name = hal::op_name(op);
  const bool sparse = block_idx.present();
  AttentionPC pc{};
  set_paged_shape(pc, a, name);
  pc.Qb = static_cast<uint32_t>(Qb);
  pc.NQ = u32(NQ, name, "NQ");
  pc.k = sparse ? u32(block_idx.dim(2), name, "block_idx") : 0;
  pc.Hs = sparse ? u32(block_idx.dim(1), name, "block_idx") : 0;
  if (sparse && shared_mode) pc.Hs = 1;

  const uint64_t rows = uint64_t{pc.T} * pc.Hq;
  const uint32_t units = sparse ? pc.k : pc.max_blocks;  // the key set, in split units
  uint32_t n_split = 1;
  if (rows > 0 && rows < kTargetGroups && units > 1)
    n_split = static_cast<uint32_t>(std::min<uint64_t>(units, (kTargetGroups + rows - 1) / rows));
  pc.per_split = n_split > 1 ? (units + n_split - 1) / n_split : units;
  pc.n_split = n_split > 1 ? (units + pc.per_split - 1) / pc.per_split : 1;

  const std::string kind = sparse ? "sparse" : "dense";
  auto bind_inputs = [&](Launch& l) { bind_paged(l, pc, a, block_idx); };
  run_attention(s, a, "paged_attention_" + kind, pc, bind_inputs, rows, rows, pc.n_split, pc.D, pc.B, op);
}

template <typename Args>
std::string supports_paged(const Args& a, const hal::Tensor& block_idx) {
  const VulkanDevice& dev = device_of(a.q, "q");
  if (std::string why = check_head_dim(a.q.dim(2)); !why.empty()) return why;
  if (a.q.dim(0) * a.q.dim(1) >= (int64_t{1} << 32)) return "T * Hq >= 2^32";
  return check_bindable(dev,
                        {&a.q, &a.k_cache, &a.v_cache, &a.block_table, &a.kv_len, &a.cu_q, &block_idx, &a.out, &a.lse});
}

}  // namespace msa::vulkan
