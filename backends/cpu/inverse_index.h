// The inverse of a per-query block list, for the deterministic gradient sums of the
// training kernels: entries e of a CSR list (queries qi's entries list_begin[qi] ..
// list_begin[qi+1]) grouped by bucket (e.g. a page slab), each bucket's entries in
// entry order, so a bucket's sum over them runs in an order fixed by the inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace msa::cpu {

struct InverseIndex {
  std::vector<int64_t> begin;  // [buckets + 1]: bucket b holds entry[begin[b] .. begin[b+1])
  std::vector<int64_t> entry;  // entry ids, by bucket, ascending within a bucket
  std::vector<int64_t> owner;  // owner[e]: the query of entry e

  // bucket_of(query, e) gives entry e's bucket in [0, buckets).
  InverseIndex(const std::vector<int64_t>& list_begin, int64_t buckets,
               const std::function<int64_t(int64_t, int64_t)>& bucket_of) {
    const int64_t queries = static_cast<int64_t>(list_begin.size()) - 1, n = list_begin.back();
    begin.assign(static_cast<size_t>(buckets) + 1, 0);
    owner.resize(static_cast<size_t>(n));
    std::vector<int64_t> bucket(static_cast<size_t>(n));
    for (int64_t q = 0; q < queries; ++q)
      for (int64_t e = list_begin[static_cast<size_t>(q)]; e < list_begin[static_cast<size_t>(q) + 1]; ++e) {
        owner[static_cast<size_t>(e)] = q;
        bucket[static_cast<size_t>(e)] = bucket_of(q, e);
        ++begin[static_cast<size_t>(bucket[static_cast<size_t>(e)]) + 1];
      }
    for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
    std::vector<int64_t> fill(begin.begin(), begin.end() - 1);
    entry.resize(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e)
      entry[static_cast<size_t>(fill[static_cast<size_t>(bucket[static_cast<size_t>(e)])]++)] = e;
  }
};

}  // namespace msa::cpu
