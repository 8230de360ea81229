// The cross-check metrics (docs/spec.md, "Cross-check tolerances") over host tensors.
#pragma once
#include <string>

#include "check/case.h"
#include "hal/host_tensor.h"

namespace msa::cases {

// One output's comparison: `error` is the metric that came closest to (or went past)
// its bound `tolerance`; `ok` is false with `what` saying where and how it failed.
struct Verdict {
  bool ok = true;
  double error = 0;
  double tolerance = 0;
  std::string what;
  // error / tolerance (inf when the bound is 0 and the error is not).
  double ratio() const;
};

// Compares `got` with `ref` (same dtype and shape) under `cmp`; `name` labels messages.
Verdict compare_tensors(const std::string& name, const hal::HostTensor& got, const hal::HostTensor& ref,
                        const Compare& cmp);

}  // namespace msa::cases
