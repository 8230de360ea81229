// Host checks shared by the attention ops and their training counterparts
// (ops/attention_ops.cpp, ops/training_ops.cpp). Every failure throws msa::Error naming
// the argument, through the op's Checker.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "ops/args.h"
#include "ops/checks.h"

namespace msa::ops::detail {

inline constexpr std::initializer_list<hal::DType> kActDtypes = {hal::DType::f32, hal::DType::bf16, hal::DType::f16};

// Dims of a paged attention call.
struct AttnDims {
  int64_t T, Hq, Hkv, D, P, Bs, B, max_blocks;
};

// The paged batch alone: kv_len [B], cu_q [B+1], block_table [B][max_blocks], all i32,
// with max_blocks * Bs within the int32 position range.
struct BatchDims {
  int64_t B, max_blocks;
};
BatchDims check_paged_batch(const Checker& c, const PagedBatch& batch, int64_t Bs);

// q, k_cache, v_cache (nullptr when the op has none) and the paged batch (block_table,
// kv_len, cu_q).
AttnDims check_paged_inputs(const Checker& c, const Tensor& q, const Tensor& k_cache, const Tensor* v_cache,
                            const PagedBatch& batch);

// out has q's shape and dtype; lse is [rows of q][heads of q] f32.
void check_out_lse(const Checker& c, const Tensor& q, const Tensor& out, const Tensor& lse);

// `t` is an f32 tensor with the dims of `like` (named `like_arg`).
void check_f32_like(const Checker& c, const Tensor& t, const char* arg, const Tensor& like, const char* like_arg);

// scale = 0 -> 1/sqrt(dim); a non-finite scale is an error.
float resolve_scale(const Checker& c, float scale, int64_t dim);

void check_mode(const Checker& c, SelectionMode mode);

// block_idx [NQ][Hs][k >= 1] i32 with Hs = 1 (shared) or Hkv (per_kv_head).
void check_block_idx(const Checker& c, const Tensor& block_idx, int64_t NQ, SelectionMode mode, int64_t Hkv);

// q, k, v [N][H][D] of patch attention: one activation dtype, one shape.
void check_patch_qkv(const Checker& c, const Tensor& q, const Tensor& k, const Tensor& v);

// The visual items [n][3] of patch attention cover exactly N patches (host memory only).
void check_items(const Checker& c, const Tensor& items, int64_t N);

}  // namespace msa::ops::detail
