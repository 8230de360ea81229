// Host checks and dispatch for the training ops (docs/training.md):
// sparse_block_attention_backward, dense_attention_backward, patch_attention_3d_backward,
// indexer_kl.
#include <string>
#include <utility>
#include <vector>

#include "ops/attention_checks.h"
#include "ops/checks.h"
#include "ops/ops.h"

namespace msa::ops {
namespace {

using detail::AttnDims;
using detail::Checker;
using hal::DType;
using hal::OpId;

using Named = std::pair<const Tensor*, const char*>;

// No output overlaps an input or another output.
void check_no_alias(const Checker& c, std::initializer_list<Named> outs, std::initializer_list<Named> ins) {
  for (const auto& [o, oname] : outs) {
    for (const auto& [i, iname] : ins) c.no_alias(*o, oname, *i, iname);
    for (const auto& [o2, o2name] : outs)
      if (o != o2) c.no_alias(*o, oname, *o2, o2name);
  }
}

// dout and the forward's out/lse (the shapes of q), then dq [T][Hq][D] f32 and the f32
// key/value gradients with the keys' shape (`k`, named `k_name`).
void check_attention_grads(const Checker& c, const Tensor& q, const Tensor& k, const char* k_name, const Tensor& dout,
                           const Tensor& out, const Tensor& lse, const Tensor& dq, const Tensor& dk,
                           const char* dk_name, const Tensor& dv, const char* dv_name) {
  c.tensor(dout, "dout", 3);
  c.same_shape(dout, "dout", q, "q");
  detail::check_out_lse(c, q, out, lse);
  detail::check_f32_like(c, dq, "dq", q, "q");
  detail::check_f32_like(c, dk, dk_name, k, k_name);
  detail::check_f32_like(c, dv, dv_name, k, k_name);
}

// The paged backward ops' first checks: q and the caches with their batch, then dout,
// out/lse and the gradients dq, dk_cache, dv_cache.
template <typename Args>
AttnDims check_paged_backward(const Checker& c, const Args& a) {
  const AttnDims d = detail::check_paged_inputs(c, a.q, a.k_cache, &a.v_cache, ops::batch_of(a));
  check_attention_grads(c, a.q, a.k_cache, "k_cache", a.dout, a.out, a.lse, a.dq, a.dk_cache, "dk_cache", a.dv_cache,
                        "dv_cache");
  return d;
}

// No gradient of a paged backward op overlaps an input or another gradient; `block_idx`
// is the selection of sparse_block_attention_backward (absent for dense).
template <typename Args>
void check_paged_backward_no_alias(const Checker& c, const Args& a, const Tensor& block_idx) {
  check_no_alias(c, {{&a.dq, "dq"}, {&a.dk_cache, "dk_cache"}, {&a.dv_cache, "dv_cache"}},
                 {{&a.dout, "dout"},
                  {&a.q, "q"},
                  {&a.k_cache, "k_cache"},
                  {&a.v_cache, "v_cache"},
                  {&a.block_table, "block_table"},
                  {&a.kv_len, "kv_len"},
                  {&a.cu_q, "cu_q"},
                  {&block_idx, "block_idx"},
                  {&a.out, "out"},
                  {&a.lse, "lse"}});
}

}  // namespace

void sparse_block_attention_backward(hal::Device& device, const SparseAttentionBackwardArgs& args) {
  Checker c(device, OpId::sparse_block_attention_backward);
  SparseAttentionBackwardArgs a = args;
  const AttnDims d = check_paged_backward(c, a);
  c.query_block_size(a.Qb);
  MSA_REQUIRE(c, a.NQ >= 0, "NQ", "must be >= 0");
  detail::check_mode(c, a.mode);
  detail::check_block_idx(c, a.block_idx, a.NQ, a.mode, d.Hkv);
  check_paged_backward_no_alias(c, a, a.block_idx);
  a.scale = detail::resolve_scale(c, a.scale, d.D);
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, d.P, static_cast<int>(d.Bs), a.Qb, a.NQ, d.T);
  detail::dispatch(device, OpId::sparse_block_attention_backward, &a);
}

void dense_attention_backward(hal::Device& device, const DenseAttentionBackwardArgs& args) {
  Checker c(device, OpId::dense_attention_backward);
  DenseAttentionBackwardArgs a = args;
  const AttnDims d = check_paged_backward(c, a);
  check_paged_backward_no_alias(c, a, Tensor{});  // no selection
  a.scale = detail::resolve_scale(c, a.scale, d.D);
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, d.P, static_cast<int>(d.Bs), 1, -1, d.T);
  detail::dispatch(device, OpId::dense_attention_backward, &a);
}

void patch_attention_3d_backward(hal::Device& device, const PatchAttention3dBackwardArgs& args) {
  Checker c(device, OpId::patch_attention_3d_backward);
  PatchAttention3dBackwardArgs a = args;
  detail::check_patch_qkv(c, a.q, a.k, a.v);
  detail::check_items(c, a.items, a.q.shape[0]);
  MSA_REQUIRE(c, a.window >= 1, "window", "must be >= 1 temporal patch, got " + std::to_string(a.window));
  check_attention_grads(c, a.q, a.k, "k", a.dout, a.out, a.lse, a.dq, a.dk, "dk", a.dv, "dv");
  check_no_alias(c, {{&a.dq, "dq"}, {&a.dk, "dk"}, {&a.dv, "dv"}},
                 {{&a.dout, "dout"},
                  {&a.q, "q"},
                  {&a.k, "k"},
                  {&a.v, "v"},
                  {&a.items, "items"},
                  {&a.out, "out"},
                  {&a.lse, "lse"}});
  a.scale = detail::resolve_scale(c, a.scale, a.q.shape[2]);
  detail::dispatch(device, OpId::patch_attention_3d_backward, &a);
}

void indexer_kl(hal::Device& device, const IndexerKlArgs& args) {
  Checker c(device, OpId::indexer_kl);
  IndexerKlArgs a = args;
  MSA_REQUIRE(c, a.stage == KlStage::sparse || a.stage == KlStage::dense, "stage", "must be sparse or dense");
  const bool sparse = a.stage == KlStage::sparse;
  const AttnDims d = detail::check_paged_inputs(c, a.q, a.k_cache, nullptr, ops::batch_of(a));
  c.tensor(a.lse, "lse", 2, {DType::f32});
  c.dim(a.lse, "lse", 0, d.T, "T");
  c.dim(a.lse, "lse", 1, d.Hq, "Hq");
  c.tensor(a.qi, "qi", 3, detail::kActDtypes);
  c.dim(a.qi, "qi", 0, d.T, "T (tokens of q)");
  const int64_t Hi = a.qi.shape[1], Di = a.qi.shape[2];
  MSA_REQUIRE(c, Di >= 1, "qi", "indexer head dim Di must be >= 1");
  detail::check_mode(c, a.mode);
  const bool shared = a.mode == SelectionMode::shared;
  const int64_t Hs = shared ? 1 : d.Hkv;
  c.dim(a.qi, "qi", 1, Hs, shared ? "1 (shared mode: Hi == Hs)" : "Hkv (per_kv_head mode: Hi == Hs)");
  c.tensor(a.ki_cache, "ki_cache", 3);
  MSA_REQUIRE(c, a.ki_cache.dtype == DType::bf16 || a.ki_cache.dtype == DType::f32, "ki_cache",
              std::string("dtype ") + hal::dtype_name(a.ki_cache.dtype) +
                  " not allowed (expected bf16 or f32; fp8 and NVFP4 keys are inference formats)");
  c.dim(a.ki_cache, "ki_cache", 0, d.P, "P (pages of k_cache)");
  c.dim(a.ki_cache, "ki_cache", 1, d.Bs, "Bs (block size of k_cache)");
  c.dim(a.ki_cache, "ki_cache", 2, Di, "Di (indexer head dim of qi)");
  if (sparse) {
    c.query_block_size(a.Qb);
    MSA_REQUIRE(c, a.NQ >= 0, "NQ", "must be >= 0");
    detail::check_block_idx(c, a.block_idx, a.NQ, a.mode, d.Hkv);
  } else {
    MSA_REQUIRE(c, !a.block_idx.present(), "block_idx", "is only allowed with stage sparse");
  }
  if (a.dkl.present()) {
    c.tensor(a.dkl, "dkl", 2, {DType::f32});
    c.dim(a.dkl, "dkl", 0, d.T, "T");
    c.dim(a.dkl, "dkl", 1, Hs, "Hs");
  }
  c.tensor(a.kl, "kl", 2, {DType::f32});
  c.dim(a.kl, "kl", 0, d.T, "T");
  c.dim(a.kl, "kl", 1, Hs, "Hs");
  detail::check_f32_like(c, a.dqi, "dqi", a.qi, "qi");
  detail::check_f32_like(c, a.dki_cache, "dki_cache", a.ki_cache, "ki_cache");
  check_no_alias(c, {{&a.kl, "kl"}, {&a.dqi, "dqi"}, {&a.dki_cache, "dki_cache"}},
                 {{&a.qi, "qi"},
                  {&a.ki_cache, "ki_cache"},
                  {&a.q, "q"},
                  {&a.k_cache, "k_cache"},
                  {&a.lse, "lse"},
                  {&a.block_table, "block_table"},
                  {&a.kv_len, "kv_len"},
                  {&a.cu_q, "cu_q"},
                  {&a.block_idx, "block_idx"},
                  {&a.dkl, "dkl"}});
  a.scale = detail::resolve_scale(c, a.scale, d.D);
  c.finite(a.scale_i, "scale_i");
  if (a.scale_i == 0.0f) a.scale_i = detail::resolve_scale(c, 0.0f, Di);
  detail::check_batch_on_host(c, a.cu_q, a.kv_len, &a.block_table, d.P, static_cast<int>(d.Bs), a.Qb,
                              sparse ? a.NQ : -1, d.T);
  detail::dispatch(device, OpId::indexer_kl, &a);
}

}  // namespace msa::ops
