// Non-finite inputs in attended slots for the cross-check (docs/spec.md, "Non-finite
// inputs"): a NaN or Inf key, value, query or indexer key, or a finite pair whose logit
// overflows f32, at token 0 of sequence 0 (which every query of that sequence may see).
// The reference and the backend must then give NaN in the same rows.
#pragma once
#include "check/batch.h"
#include "check/case.h"

namespace msa::cases {

enum class Poison { none, nan_key, inf_key, nan_value, inf_value, nan_query, overflow, nan_index_key };

// "nan_key", ... ("" for none).
const char* poison_name(Poison p);

// Writes `p` into the slots of `d` (q, k_cache, v_cache, ki_cache as present; caches
// [P][Hkv][Bs][D] or [P][Bs][Di]) and lets out, lse and block_score match the
// reference's NaN rows (Compare::nan_rows).
void apply_poison(CaseData& d, Poison p, const Pages& pages);

}  // namespace msa::cases
