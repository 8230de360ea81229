// Median of timing samples (the upper middle one for an even count; 0 for none).
#pragma once
#include <algorithm>
#include <vector>

namespace msa::cli {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace msa::cli
