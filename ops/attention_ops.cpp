// Host checks and dispatch for the attention ops: indexer_score, block_topk, the
// composite indexer_topk, sparse_block_attention, dense_attention, patch_attention_3d, kv_append.
#include <algorithm>
#include <cmath>
#include <vector>

#include "hal/error.h"
#include "hal/nvfp4.h"
#include "ops/attention_checks.h"
#include "ops/checks.h"
#include "ops/ops.h"

namespace msa::ops {
namespace {

using detail::AttnDims;
using detail::check_mode;
using detail::check_out_lse;
using detail::check_paged_inputs;
using detail::Checker;
using detail::resolve_scale;
using hal::DType;
using hal::OpId;

constexpr auto kAct = detail::kActDtypes;

// The paged attention inputs plus the forward's out/lse, which alias no input.
AttnDims check_paged_attention(const Checker& c, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const PagedBatch& batch, const Tensor& out, const Tensor& lse) {
  const AttnDims d = check_paged_inputs(c, q, k_cache, &v_cache, batch);
  const auto& [block_table, kv_len, cu_q] = batch;
  check_out_lse(c, q, out, lse);
  for (const auto& [in, name] : {std::pair{&q, "q"},
                                 {&k_cache, "k_cache"},
                                 {&v_cache, "v_cache"},
                                 {&block_table, "block_table"},
                                 {&kv_len, "kv_len"},
                                 {&cu_q, "cu_q"}}) {
    c.no_alias(out, "out", *in, name);
    c.no_alias(lse, "lse", *in, name);
  }
  c.no_alias(lse, "lse", out, "out");
  return d;
}

}  // namespace

const char* mode_name(SelectionMode m) { return m == SelectionMode::shared ? "shared" : "per_kv_head"; }
const char* pool_name(Pool p) { return p == Pool::lse ? "lse" : "max"; }
const char* stage_name(KlStage s) { return s == KlStage::dense ? "dense" : "sparse"; }

namespace {

// The indexer key cache and its scales for keys of Di dims (shared by indexer_score and
// kv_append): [P][Bs][Di] bf16 / f32 / fp8_e4m3 with an optional [P][Bs] f32 scale for
// fp8, or NVFP4: [P][Bs][Di/2] fp4_e2m1x2 with the required [P][Bs][Di/16] fp8_e4m3 group
// scales (Di a multiple of 16).
void check_indexer_keys(Checker& c, const Tensor& ki_cache, const Tensor& ki_scale, int64_t P, int64_t Bs, int64_t Di,
                        const char* pages) {
  if (ki_cache.dtype == DType::fp4_e2m1x2) {
    MSA_REQUIRE(c, Di % hal::kNvfp4Group == 0, "ki_cache",
                "NVFP4 keys need Di to be a multiple of 16, got Di = " + std::to_string(Di));
    c.dim(ki_cache, "ki_cache", 2, Di / 2, "Di/2 (two E2M1 keys per byte)");
    MSA_REQUIRE(c, ki_scale.present(), "ki_scale",
                "is required with an NVFP4 (fp4_e2m1x2) ki_cache: [P][Bs][Di/16] fp8_e4m3");
    c.tensor(ki_scale, "ki_scale", 3, {DType::fp8_e4m3});
    c.dim(ki_scale, "ki_scale", 0, P, pages);
    c.dim(ki_scale, "ki_scale", 1, Bs, "Bs");
    c.dim(ki_scale, "ki_scale", 2, Di / hal::kNvfp4Group, "Di/16 (one scale per 16 dims)");
    return;
  }
  c.dim(ki_cache, "ki_cache", 2, Di, "Di (indexer head dim)");
  if (ki_scale.present()) {
    MSA_REQUIRE(c, ki_cache.dtype == DType::fp8_e4m3, "ki_scale",
                "is only allowed with an fp8_e4m3 or NVFP4 (fp4_e2m1x2) ki_cache");
    c.tensor(ki_scale, "ki_scale", 2, {DType::f32});
    c.dim(ki_scale, "ki_scale", 0, P, pages);
    c.dim(ki_scale, "ki_scale", 1, Bs, "Bs");
  }
}

// indexer_score's host checks; returns the args with the defaults resolved.
IndexerScoreArgs checked_indexer_score(hal::Device& device, const IndexerScoreArgs& args) {
  Checker c(device, OpId::indexer_score);
  IndexerScoreArgs a = args;
  c.tensor(a.qi, "qi", 3, kAct);
  c.tensor(a.ki_cache, "ki_cache", 3, {DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp4_e2m1x2});
  const int64_t T = a.qi.shape[0], Hi = a.qi.shape[1], Di = a.qi.shape[2];
  const int64_t P = a.ki_cache.shape[0], Bs = a.ki_cache.shape[1];
  MSA_REQUIRE(c, Hi >= 1, "qi", "needs at least one indexer head");
  MSA_REQUIRE(c, Di >= 1, "qi", "indexer head dim Di must be >= 1");
  MSA_REQUIRE(c, Bs >= 1, "ki_cache", "block size Bs (dim 1) must be >= 1");
  check_indexer_keys(c, a.ki_cache, a.ki_scale, P, Bs, Di, "P (pages of ki_cache)");
  check_mode(c, a.mode);
  if (a.mode == SelectionMode::shared)
    MSA_REQUIRE(c, Hi == 1, "qi", "shared mode needs exactly one indexer head, got Hi = " + std::to_string(Hi));
  c.query_block_size(a.Qb);
  MSA_REQUIRE(c, a.NQ >= 0, "NQ", "must be >= 0");
  MSA_REQUIRE(c, a.pool == Pool::max || a.pool == Pool::lse, "pool", "must be max or lse");
  const int64_t max_blocks = detail::check_paged_batch(c, ops::batch_of(a), Bs).max_blocks;
  c.tensor(a.block_score, "block_score", 3, {DType::f32});
  c.dim(a.block_score, "block_score", 0, a.NQ, "NQ");
  c.dim(a.block_score, "block_score", 1, Hi, "Hi");
  c.dim(a.block_score, "block_score", 2, max_blocks, "max_blocks");
  for (const auto& [in, name] : {std::pair{&a.qi, "qi"},
                                 {&a.ki_cache, "ki_cache"},
                                 {&a.ki_scale, "ki_scale"},
                                 {&a.block_table, "block_table"},
                                 {&a.kv_len, "kv_len"},
                                 {&a.cu_q, "cu_q"}})
    c.no_alias(a.block_score, "block_score", *in, name);
  a.scale = resolve_scale(c, a.scale, Di);
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, P, static_cast<int>(Bs), a.Qb, a.NQ, T);
  return a;
}

// block_topk's host checks.
void check_block_topk(hal::Device& device, const BlockTopkArgs& a) {
  Checker c(device, OpId::block_topk);
  c.tensor(a.block_score, "block_score", 3, {DType::f32});
  const int64_t Hs = a.block_score.shape[1];
  MSA_REQUIRE(c, Hs >= 1, "block_score", "needs at least one selection head (dim 1)");
  c.dim(a.block_score, "block_score", 0, a.NQ, "NQ");
  c.query_block_size(a.Qb);
  MSA_REQUIRE(c, a.NQ >= 0, "NQ", "must be >= 0");
  MSA_REQUIRE(c, a.Bs >= 1, "Bs", "must be >= 1");
  MSA_REQUIRE(c, a.k >= 1, "k", "must be >= 1");
  MSA_REQUIRE(c, a.n_sink >= 0, "n_sink", "must be >= 0");
  MSA_REQUIRE(c, a.n_local >= 0, "n_local", "must be >= 0");
  const int64_t forced = int64_t{a.n_sink} + (a.n_local > 0 ? int64_t{a.n_local} - 1 + std::max(1, a.Qb / a.Bs) : 0);
  MSA_REQUIRE(
      c, a.k >= forced, "k",
      "k = " + std::to_string(a.k) +
          " is smaller than the forced blocks n_sink + (n_local - 1 + max(1, Qb/Bs)) = " + std::to_string(forced));
  c.tensor(a.kv_len, "kv_len", 1, {DType::i32});
  const int64_t B = a.kv_len.shape[0];
  c.tensor(a.cu_q, "cu_q", 1, {DType::i32});
  c.dim(a.cu_q, "cu_q", 0, B + 1, "B+1");
  c.tensor(a.block_idx, "block_idx", 3, {DType::i32});
  c.dim(a.block_idx, "block_idx", 0, a.NQ, "NQ");
  c.dim(a.block_idx, "block_idx", 1, Hs, "Hs");
  c.dim(a.block_idx, "block_idx", 2, a.k, "k");
  c.tensor(a.block_cnt, "block_cnt", 2, {DType::i32});
  c.dim(a.block_cnt, "block_cnt", 0, a.NQ, "NQ");
  c.dim(a.block_cnt, "block_cnt", 1, Hs, "Hs");
  for (const auto& [in, name] : {std::pair{&a.block_score, "block_score"}, {&a.kv_len, "kv_len"}, {&a.cu_q, "cu_q"}}) {
    c.no_alias(a.block_idx, "block_idx", *in, name);
    c.no_alias(a.block_cnt, "block_cnt", *in, name);
  }
  c.no_alias(a.block_cnt, "block_cnt", a.block_idx, "block_idx");
  if (device.host_accessible()) {
    // kv_len bound from the score row width: positions must fall in known blocks.
    std::vector<int32_t> len(static_cast<size_t>(B));
    if (B > 0) device.stream().download(len.data(), a.kv_len);
    const int64_t max_blocks = a.block_score.shape[2];
    for (int64_t b = 0; b < B; ++b)
      MSA_REQUIRE(c, int64_t{len[b]} <= max_blocks * a.Bs, "kv_len",
                  "kv_len[" + std::to_string(b) + "] = " + std::to_string(len[b]) +
                      " exceeds max_blocks * Bs of block_score = " + std::to_string(max_blocks * a.Bs));
    std::vector<int32_t> cu(static_cast<size_t>(B + 1));
    device.stream().download(cu.data(), a.cu_q);
    detail::check_batch_on_host(c, a.cu_q, a.kv_len, nullptr, 0, a.Bs, a.Qb, a.NQ, B > 0 ? cu[B] : 0);
  }
}

}  // namespace

void indexer_score(hal::Device& device, const IndexerScoreArgs& args) {
  const IndexerScoreArgs a = checked_indexer_score(device, args);
  detail::dispatch(device, OpId::indexer_score, &a);
}

void block_topk(hal::Device& device, const BlockTopkArgs& a) {
  check_block_topk(device, a);
  detail::dispatch(device, OpId::block_topk, &a);
}

void indexer_topk(hal::Device& device, const IndexerTopkArgs& args) {
  IndexerTopkArgs a = args;
  a.indexer = checked_indexer_score(device, args.indexer);
  check_block_topk(device, a.topk);
  const IndexerScoreArgs& idx = a.indexer;
  const BlockTopkArgs& topk = a.topk;
  // The select reads the scores the indexer writes, over the same batch.
  Checker c(device, OpId::indexer_topk);
  const auto same_view = [](const Tensor& x, const Tensor& y) {
    return x.buffer == y.buffer && x.offset == y.offset && x.dtype == y.dtype && x.shape == y.shape;
  };
  MSA_REQUIRE(c, same_view(topk.block_score, idx.block_score), "block_score",
              "block_topk's block_score must be the tensor indexer_score writes");
  MSA_REQUIRE(c, same_view(topk.kv_len, idx.kv_len), "kv_len", "both ops must be given the same kv_len");
  MSA_REQUIRE(c, same_view(topk.cu_q, idx.cu_q), "cu_q", "both ops must be given the same cu_q");
  MSA_REQUIRE(c, topk.Qb == idx.Qb, "Qb", "both ops must be given the same Qb");
  MSA_REQUIRE(c, topk.NQ == idx.NQ, "NQ", "both ops must be given the same NQ");
  MSA_REQUIRE(c, topk.Bs == idx.ki_cache.shape[1], "Bs",
              "Bs = " + std::to_string(topk.Bs) + " differs from ki_cache's block size " +
                  std::to_string(idx.ki_cache.shape[1]));
  // A fused kernel writes the selection while other blocks still read the indexer's inputs.
  for (const auto& [in, name] : {std::pair{&idx.qi, "qi"},
                                 {&idx.ki_cache, "ki_cache"},
                                 {&idx.ki_scale, "ki_scale"},
                                 {&idx.block_table, "block_table"}}) {
    if (!in->present()) continue;
    c.no_alias(topk.block_idx, "block_idx", *in, name);
    c.no_alias(topk.block_cnt, "block_cnt", *in, name);
  }
  // The fused kernel runs only where each part would (it must not widen what is accepted).
  if (detail::supported(device, OpId::indexer_score, &idx) && detail::supported(device, OpId::block_topk, &topk) &&
      detail::try_fused(device, OpId::indexer_topk, &a))
    return;
  detail::dispatch(device, OpId::indexer_score, &idx);
  detail::dispatch(device, OpId::block_topk, &topk);
}

void sparse_block_attention(hal::Device& device, const SparseAttentionArgs& args) {
  Checker c(device, OpId::sparse_block_attention);
  SparseAttentionArgs a = args;
  const AttnDims d = check_paged_attention(c, a.q, a.k_cache, a.v_cache, ops::batch_of(a), a.out, a.lse);
  c.query_block_size(a.Qb);
  MSA_REQUIRE(c, a.NQ >= 0, "NQ", "must be >= 0");
  check_mode(c, a.mode);
  detail::check_block_idx(c, a.block_idx, a.NQ, a.mode, d.Hkv);
  c.no_alias(a.out, "out", a.block_idx, "block_idx");
  c.no_alias(a.lse, "lse", a.block_idx, "block_idx");
  a.scale = resolve_scale(c, a.scale, d.D);
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, d.P, static_cast<int>(d.Bs), a.Qb, a.NQ, d.T);
  detail::dispatch(device, OpId::sparse_block_attention, &a);
}

void dense_attention(hal::Device& device, const DenseAttentionArgs& args) {
  Checker c(device, OpId::dense_attention);
  DenseAttentionArgs a = args;
  const AttnDims d = check_paged_attention(c, a.q, a.k_cache, a.v_cache, ops::batch_of(a), a.out, a.lse);
  a.scale = resolve_scale(c, a.scale, d.D);
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, d.P, static_cast<int>(d.Bs), 1, -1, d.T);
  detail::dispatch(device, OpId::dense_attention, &a);
}

void patch_attention_3d(hal::Device& device, const PatchAttention3dArgs& args) {
  Checker c(device, OpId::patch_attention_3d);
  PatchAttention3dArgs a = args;
  detail::check_patch_qkv(c, a.q, a.k, a.v);
  detail::check_items(c, a.items, a.q.shape[0]);
  MSA_REQUIRE(c, a.window >= 1, "window", "must be >= 1 temporal patch, got " + std::to_string(a.window));
  c.tensor(a.out, "out", 3);
  c.same_shape(a.out, "out", a.q, "q");
  c.tensor(a.lse, "lse", 2, {DType::f32});
  c.dim(a.lse, "lse", 0, a.q.shape[0], "N");
  c.dim(a.lse, "lse", 1, a.q.shape[1], "H");
  for (const auto& [in, name] : {std::pair{&a.q, "q"}, {&a.k, "k"}, {&a.v, "v"}, {&a.items, "items"}}) {
    c.no_alias(a.out, "out", *in, name);
    c.no_alias(a.lse, "lse", *in, name);
  }
  c.no_alias(a.lse, "lse", a.out, "out");
  a.scale = resolve_scale(c, a.scale, a.q.shape[2]);
  detail::dispatch(device, OpId::patch_attention_3d, &a);
}

void kv_append(hal::Device& device, const KvAppendArgs& a) {
  Checker c(device, OpId::kv_append);
  c.tensor(a.k_cache, "k_cache", 4, kAct);
  c.tensor(a.v_cache, "v_cache", 4);
  c.same_shape(a.v_cache, "v_cache", a.k_cache, "k_cache");
  const int64_t P = a.k_cache.shape[0], Hkv = a.k_cache.shape[1], Bs = a.k_cache.shape[2], D = a.k_cache.shape[3];
  MSA_REQUIRE(c, Bs >= 1, "k_cache", "block size Bs (dim 2) must be >= 1");
  c.tensor(a.k, "k", 3);
  c.same_dtype(a.k, "k", a.k_cache, "k_cache");
  const int64_t T = a.k.shape[0];
  c.dim(a.k, "k", 1, Hkv, "Hkv");
  c.dim(a.k, "k", 2, D, "D");
  c.tensor(a.v, "v", 3);
  c.same_shape(a.v, "v", a.k, "k");
  detail::check_paged_batch(c, ops::batch_of(a), Bs);
  MSA_REQUIRE(c, a.ki.present() == a.ki_cache.present(), a.ki.present() ? "ki_cache" : "ki",
              "ki and ki_cache must be given together");
  if (a.ki_cache.present()) {
    c.tensor(a.ki_cache, "ki_cache", 3, {DType::bf16, DType::f32, DType::fp8_e4m3, DType::fp4_e2m1x2});
    c.dim(a.ki_cache, "ki_cache", 0, P, "P (pages of k_cache)");
    c.dim(a.ki_cache, "ki_cache", 1, Bs, "Bs");
    c.tensor(a.ki, "ki", 2, kAct);
    c.dim(a.ki, "ki", 0, T, "T");
    check_indexer_keys(c, a.ki_cache, a.ki_scale, P, Bs, a.ki.shape[1], "P (pages of k_cache)");
  } else if (a.ki_scale.present()) {
    MSA_REQUIRE(c, false, "ki_scale", "is only allowed with a ki_cache");
  }
  const std::pair<const Tensor*, const char*> ins[] = {{&a.k, "k"},           {&a.v, "v"},
                                                       {&a.ki, "ki"},         {&a.block_table, "block_table"},
                                                       {&a.kv_len, "kv_len"}, {&a.cu_q, "cu_q"}};
  const std::pair<const Tensor*, const char*> outs[] = {
      {&a.k_cache, "k_cache"}, {&a.v_cache, "v_cache"}, {&a.ki_cache, "ki_cache"}, {&a.ki_scale, "ki_scale"}};
  for (const auto& [o, oname] : outs) {
    for (const auto& [i, iname] : ins) c.no_alias(*o, oname, *i, iname);
    for (const auto& [o2, o2name] : outs)
      if (o != o2) c.no_alias(*o, oname, *o2, o2name);
  }
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, P, static_cast<int>(Bs), 1, -1, T);
  detail::dispatch(device, OpId::kv_append, &a);
}

}  // namespace msa::ops
