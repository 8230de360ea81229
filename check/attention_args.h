// The op arguments of the attention cases, bound to a case's slots by name ("q",
// "k_cache", "block_table", ...): one place for the single-op cases and the layer case.
#pragma once
#include <string>

#include "check/attention_cases.h"
#include "check/batch.h"
#include "check/case.h"
#include "ops/args.h"

namespace msa::cases {

ops::IndexerScoreArgs indexer_args(const AttnParams& p, const Batch& b, const Bound& t);
ops::BlockTopkArgs topk_args(const AttnParams& p, const Batch& b, const Bound& t);
ops::SparseAttentionArgs sparse_args(const AttnParams& p, const Batch& b, const Bound& t);
// Outputs in the slots `out` and `lse` (the layer case's baseline: "dense_out", "dense_lse").
ops::DenseAttentionArgs dense_args(const AttnParams& p, const Bound& t, const std::string& out = "out",
                                   const std::string& lse = "lse");

// The backward of forward args f: the same inputs and selection, f's out/lse, dout from the
// slot "dout" and the gradients from the slots named dq, dk, dv.
ops::SparseAttentionBackwardArgs sparse_backward_args(const ops::SparseAttentionArgs& f, const Bound& t,
                                                      const std::string& dq = "dq", const std::string& dk = "dk_cache",
                                                      const std::string& dv = "dv_cache");
ops::DenseAttentionBackwardArgs dense_backward_args(const ops::DenseAttentionArgs& f, const Bound& t,
                                                    const std::string& dq = "dq", const std::string& dk = "dk_cache",
                                                    const std::string& dv = "dv_cache");

}  // namespace msa::cases
