// Cases of the training ops (docs/training.md): sparse_block_attention_backward,
// dense_attention_backward, patch_attention_3d_backward and indexer_kl. Each makes the
// inputs of the matching forward case, runs that forward once on cpu-ref and gives its
// out/lse to both devices as inputs, so the backward is compared on identical inputs.
// `timed` (perf cases): out/lse come from `cpu` (fast) and the forward is the baseline.
#pragma once
#include <memory>

#include "check/attention_cases.h"
#include "check/case.h"
#include "check/support_cases.h"
#include "check/synthetic_selection.h"
#include "ops/args.h"

namespace msa::cases {

// The forward sparse_attention_case(p) plus a random dout; dq, dk_cache, dv_cache compared.
std::unique_ptr<Case> sparse_attention_backward_case(const AttnParams& p);
std::unique_ptr<Case> sparse_attention_backward_case(const AttnParams& p, bool timed);
// The forward dense_attention_case(p) plus a random dout.
std::unique_ptr<Case> dense_attention_backward_case(const AttnParams& p);
std::unique_ptr<Case> dense_attention_backward_case(const AttnParams& p, bool timed);
// The forward patch_attention_3d_case(p) plus a random dout; dq, dk, dv compared.
std::unique_ptr<Case> patch_attention_3d_backward_case(const VitParams& p);
std::unique_ptr<Case> patch_attention_3d_backward_case(const VitParams& p, bool timed);

// indexer_kl over p's batch: q and k_cache as the forward attention case, lse from the
// forward of `stage` (sparse: sparse_block_attention over p's selections; dense:
// dense_attention), qi [T][Hs][p.Di] of p.dtype, ki_cache of p.ki_dtype (bf16 or f32;
// NaN in slack slots), and with `with_dkl` a random dkl (else absent: all ones).
std::unique_ptr<Case> indexer_kl_case(const AttnParams& p, ops::KlStage stage, bool with_dkl, bool timed = false);

// msa_layer_backward (perf): indexer_score -> block_topk (into its own outputs), then
// sparse_block_attention, sparse_block_attention_backward and indexer_kl(stage sparse, dkl
// absent) over a synthetic selection of `kind` (p.n_sink, p.n_local forced); the baseline
// is dense_attention + dense_attention_backward on the same q, caches and dout.
std::unique_ptr<Case> msa_layer_backward_case(const AttnParams& p, SyntheticSelection kind);

}  // namespace msa::cases
