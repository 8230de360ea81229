// The op arguments of the attention cases, bound to a case's slots by name ("q",
// "k_cache", "block_table", ...): one place for the single-op cases and the layer case.
#pragma once
#include <string>

#include "ops/args.h"
#include "check/attention_cases.h"
#include "check/batch.h"
#include "check/case.h"

namespace msa::cases {

ops::IndexerScoreArgs indexer_args(const AttnParams& p, const Batch& b, const Bound& t);
ops::BlockTopkArgs topk_args(const AttnParams& p, const Batch& b, const Bound& t);
ops::SparseAttentionArgs sparse_args(const AttnParams& p, const Batch& b, const Bound& t);
// Outputs in the slots `out` and `lse` (the layer case's baseline: "dense_out", "dense_lse").
ops::DenseAttentionArgs dense_args(const AttnParams& p, const Bound& t, const std::string& out = "out",
                                   const std::string& lse = "lse");

}  // namespace msa::cases
