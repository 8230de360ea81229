// The attention-path cases: indexer_score, block_topk, sparse_block_attention,
// dense_attention, and the composite msa_layer (indexer -> top-k -> sparse attention,
// with dense attention as its timed baseline; perf only).
#pragma once
#include <memory>
#include <vector>

#include "check/case.h"
#include "check/poison.h"
#include "ops/args.h"

namespace msa::cases {

struct AttnParams {
  std::vector<int32_t> q_len{1}, kv_len{100};  // per sequence
  int Hq = 8, Hkv = 2, D = 64, Bs = 64, Qb = 1, k = 4;
  hal::DType dtype = hal::DType::bf16;  // q, k_cache, v_cache, out
  ops::SelectionMode mode = ops::SelectionMode::per_kv_head;
  int Di = 64;  // indexer head dim (Hi = Hkv or 1 by mode)
  hal::DType ki_dtype = hal::DType::bf16;
  bool ki_scale = false;  // fp8 keys: per-token scale tensor
  ops::Pool pool = ops::Pool::max;
  int n_sink = 0, n_local = 1;
  float scale = 0.0f;            // 0 = the op's default
  bool shuffle = true;           // shuffled page order
  bool correlated = false;       // sparse: slowly drifting selections
  bool oob_idx = false;          // sparse: entries past the sequence's blocks
  bool empty_sel = false;        // sparse: some selections empty (out 0, lse -inf)
                                 // or, for Qb > Bs, only the last block
  bool special_scores = true;    // topk: NaN, -inf, ties, +-0
  Poison poison = Poison::none;  // non-finite inputs in attended slots
  // Hi / Hs for the mode.
  int Hs() const { return mode == ops::SelectionMode::shared ? 1 : Hkv; }
};

std::unique_ptr<Case> indexer_score_case(const AttnParams& p);
std::unique_ptr<Case> block_topk_case(const AttnParams& p);
// indexer_score then block_topk through ops::indexer_topk (the fusable pair).
std::unique_ptr<Case> indexer_topk_case(const AttnParams& p);
std::unique_ptr<Case> sparse_attention_case(const AttnParams& p);
std::unique_ptr<Case> dense_attention_case(const AttnParams& p);
std::unique_ptr<Case> msa_layer_case(const AttnParams& p);

// The parameters an attention case prints in vars().
enum class VarsKind { dense, sparse, indexer, topk, layer };
std::string attn_vars(const AttnParams& p, VarsKind kind);

}  // namespace msa::cases
