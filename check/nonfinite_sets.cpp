// The non-finite cases of the quick and full sets (docs/spec.md, "Non-finite inputs").
#include <algorithm>
#include <cmath>

#include "check/poison.h"
#include "check/set_builders.h"

namespace msa::cases::sets {
namespace {

// A dense and a sparse case of the batch `p` with `x` in an attended slot.
void add_poisoned(CaseList& c, AttnParams p, Poison x) {
  p.poison = x;
  c.push_back(dense_attention_case(p));
  c.push_back(sparse_attention_case(p));
}

// The same with Hq = 8, Hkv = 2, D = Bs = 64; the sparse case selects `k` blocks.
void add_poisoned(CaseList& c, const Lens& lens, int k, DType t, Poison x) {
  add_poisoned(c, attn(lens, 8, 2, 64, 64, 1, k, t), x);
}

}  // namespace

// NaN / Inf in attended keys, values, queries and indexer keys, and an f32 overflow
// (docs/spec.md, "Non-finite inputs"): the backend's NaN rows must be the reference's.
void add_nonfinite(CaseList& c) {
  for (Poison x :
       {Poison::nan_key, Poison::inf_key, Poison::nan_value, Poison::inf_value, Poison::nan_query, Poison::overflow})
    add_poisoned(c, kDecodeVarlen, 2, kBF16, x);
  for (Poison x : {Poison::nan_key, Poison::inf_value, Poison::overflow})
    add_poisoned(c, kPrefix, 2, kF32, x);  // prefill: causal rows
  for (Poison x : {Poison::nan_key, Poison::inf_value})
    add_poisoned(c, {{1, 1}, {3000, 2100}}, 16, kBF16, x);  // long contexts: split-KV paths and their merge
  AttnParams i = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kBF16);
  i.poison = Poison::nan_index_key;
  c.push_back(indexer_score_case(i));
  i = attn(kPrefix, 8, 2, 64, 64, 1, 2, kF32);
  i.poison = Poison::nan_index_key;
  i.pool = Pool::lse;
  c.push_back(indexer_score_case(i));
}

// The non-finite rule on the shapes the GPU backends' tuned kernels take (full set): the
// M3 decode group (16 query heads per KV head, D = Bs = 128), bf16 prefill at D = 128
// (tensor-core flash kernels, one token and 64-token query blocks), prefill-sized indexer
// calls (tensor-core indexers) with bf16 and fp8 keys, both poolings.
void add_nonfinite_tuned(CaseList& c) {
  for (Poison x : {Poison::nan_key, Poison::nan_value, Poison::inf_value, Poison::overflow}) {
    add_poisoned(c, attn({{1, 1}, {3000, 2100}}, 16, 1, 128, 128, 1, 8, kBF16), x);
    add_poisoned(c, attn({{200}, {600}}, 8, 2, 128, 64, 1, 4, kBF16), x);
    AttnParams s = attn({{256}, {256}}, 8, 2, 128, 64, 64, 2, kBF16);
    s.poison = x;
    c.push_back(sparse_attention_case(s));
  }
  for (DType ki : {kBF16, kFP8})
    for (Pool pool : {Pool::max, Pool::lse})
      for (const Lens& l : {Lens{{256}, {600}}, Lens{{1, 1}, {3000, 2100}}}) {
        AttnParams i = attn(l, 8, 2, 64, 64, 1, 2, kBF16);
        i.ki_dtype = ki;
        i.pool = pool;
        i.poison = Poison::nan_index_key;
        c.push_back(indexer_score_case(i));
      }
}

}  // namespace msa::cases::sets
