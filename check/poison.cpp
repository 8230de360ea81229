#include "check/poison.h"

#include <limits>
#include <string>

namespace msa::cases {
namespace {

Slot* slot_named(CaseData& d, const std::string& name) {
  for (Slot& s : d.slots)
    if (s.name == name && !s.absent) return &s;
  return nullptr;
}

// Element `dim` of token 0 of sequence 0, KV head 0, in a cache slot (either layout).
size_t token0(const Slot& cache, const Pages& pages, int64_t dim) {
  const int64_t page = pages.table[0], D = cache.shape.back();
  const int64_t heads = cache.shape.size() == 4 ? cache.shape[1] : 1;
  return static_cast<size_t>(page * heads * pages.Bs * D + dim);
}

}  // namespace

const char* poison_name(Poison p) {
  switch (p) {
    case Poison::none:
      return "";
    case Poison::nan_key:
      return "nan_key";
    case Poison::inf_key:
      return "inf_key";
    case Poison::nan_value:
      return "nan_value";
    case Poison::inf_value:
      return "inf_value";
    case Poison::nan_query:
      return "nan_query";
    case Poison::overflow:
      return "overflow";
    case Poison::nan_index_key:
      return "nan_index_key";
  }
  return "";
}

void apply_poison(CaseData& d, Poison p, const Pages& pages) {
  if (p == Poison::none || pages.table.empty() || pages.table[0] < 0) return;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Slot* q = slot_named(d, "q");
  Slot* k = slot_named(d, "k_cache");
  Slot* v = slot_named(d, "v_cache");
  Slot* ki = slot_named(d, "ki_cache");
  switch (p) {
    case Poison::nan_key:
      if (k) k->host.set(token0(*k, pages, 1), nan);
      break;
    case Poison::inf_key:
      if (k) k->host.set(token0(*k, pages, 1), inf);
      break;
    case Poison::nan_value:
      if (v) v->host.set(token0(*v, pages, 1), nan);
      break;
    case Poison::inf_value:
      if (v) v->host.set(token0(*v, pages, 1), -inf);
      break;
    case Poison::nan_query:
      if (q) q->host.set(1, nan);
      break;
    case Poison::overflow:
      // One large dim: q[0][0][1] * k[1] = 1000 * 3.2e37 overflows f32 however the
      // product is ordered or scaled (both finite). Other queries (|q| < 10) get one huge
      // but finite logit for token 0 in every order, so their softmax stays defined.
      if (q && k) {
        q->host.set(1, 1000.0f);
        k->host.set(token0(*k, pages, 1), 3.2e37f);
      }
      break;
    case Poison::nan_index_key:
      if (ki) ki->host.set(token0(*ki, pages, 1), nan);
      break;
    case Poison::none:
      break;
  }
  for (const char* name : {"out", "lse", "block_score"})
    if (Slot* s = slot_named(d, name)) s->cmp.nan_rows = true;
}

}  // namespace msa::cases
