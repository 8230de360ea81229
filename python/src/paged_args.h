// The paged-cache arguments (q, k_cache, v_cache, block_table, kv_len, cu_q) that the
// sparse and dense attention bindings and their backward passes share.
#pragma once
#include "python/src/call.h"

namespace msa::python {

// The paged-cache arguments shared by sparse and dense attention.
struct PagedSlots {
  int q, k_cache, v_cache, block_table, kv_len, cu_q;
};

inline PagedSlots paged_args(Call& c, py::handle q, py::handle k_cache, py::handle v_cache, py::handle block_table,
                             py::handle kv_len, py::handle cu_q) {
  return {c.arg("q", q, Role::in),
          c.arg("k_cache", k_cache, Role::in),
          c.arg("v_cache", v_cache, Role::in),
          c.arg("block_table", block_table, Role::in),
          c.arg("kv_len", kv_len, Role::in),
          c.arg("cu_q", cu_q, Role::in)};
}

template <typename Args>
void fill_paged(const Call& c, const PagedSlots& s, Args& a) {
  a.q = c.tensor(s.q);
  a.k_cache = c.tensor(s.k_cache);
  a.v_cache = c.tensor(s.v_cache);
  a.block_table = c.tensor(s.block_table);
  a.kv_len = c.tensor(s.kv_len);
  a.cu_q = c.tensor(s.cu_q);
}

}  // namespace msa::python
