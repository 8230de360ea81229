#include "check/compare.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

namespace msa::cases {
namespace {

// "[3,1]" for flat row r of a tensor whose rows are its last dim.
std::string row_index(const hal::HostTensor& t, int64_t r) {
  std::vector<int64_t> idx;
  for (size_t d = t.shape.size() - 1; d-- > 0;) {
    const int64_t n = t.shape[d] > 0 ? t.shape[d] : 1;
    idx.push_back(r % n);
    r /= n;
  }
  std::string s = "[";
  for (size_t i = idx.size(); i-- > 0;) s += std::to_string(idx[i]) + (i ? "," : "");
  return s + "]";
}

std::string flat_index(const hal::HostTensor& t, int64_t i) {
  std::vector<int64_t> idx;
  for (size_t d = t.shape.size(); d-- > 0;) {
    const int64_t n = t.shape[d] > 0 ? t.shape[d] : 1;
    idx.push_back(i % n);
    i /= n;
  }
  std::string s = "[";
  for (size_t k = idx.size(); k-- > 0;) s += std::to_string(idx[k]) + (k ? "," : "");
  return s + "]";
}

std::string num(double x) {
  std::ostringstream o;
  o.precision(3);
  o << x;
  return o.str();
}

// err / (den) with 0/0 = 0 and x/0 = inf.
double ratio_of(double err, double den) {
  if (den > 0) return err / den;
  return err > 0 ? std::numeric_limits<double>::infinity() : 0.0;
}

Verdict compare_nmse(const std::string& name, const hal::HostTensor& got, const hal::HostTensor& ref,
                     const Compare& cmp) {
  Verdict v;
  const int64_t n = ref.numel();
  const int64_t row = ref.shape.empty() ? 1 : std::max<int64_t>(ref.shape.back(), 1);
  const int64_t rows = (n + row - 1) / row;
  std::vector<double> row_err(static_cast<size_t>(rows), 0.0), row_energy(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double& num_r = row_err[static_cast<size_t>(r)];
    double& den_r = row_energy[static_cast<size_t>(r)];
    for (int64_t i = r * row; i < (r + 1) * row && i < n; ++i) {
      const double a = got.get(static_cast<size_t>(i)), b = ref.get(static_cast<size_t>(i));
      if (cmp.nan_rows && std::isnan(b)) {
        if (std::isnan(a)) continue;
        v.ok = false;
        v.error = std::numeric_limits<double>::infinity();
        v.tolerance = cmp.tol_global;
        v.what = name + flat_index(ref, i) + " = " + num(a) + " (reference NaN)";
        return v;
      }
      if (!std::isfinite(b)) {
        // A non-finite reference (an untouched NaN slot of an in/out tensor) must be kept
        // bit for bit.
        const size_t es = hal::dtype_size(ref.dtype);
        if (std::memcmp(got.bytes.data() + i * es, ref.bytes.data() + i * es, es) != 0) {
          v.ok = false;
          v.error = std::numeric_limits<double>::infinity();
          v.tolerance = 0;
          v.what = name + flat_index(ref, i) + " = " + num(a) + ", reference " + num(b);
          return v;
        }
        continue;
      }
      if (!std::isfinite(a)) {
        v.ok = false;
        v.error = std::numeric_limits<double>::infinity();
        v.tolerance = cmp.tol_global;
        v.what = name + flat_index(ref, i) + " = " + num(a) + " (reference " + num(b) + ")";
        return v;
      }
      num_r += (a - b) * (a - b);
      den_r += b * b;
    }
  }
  // The per-row denominator floor: row_floor times the mean energy of the nonzero rows.
  double den_min = 0;
  if (cmp.row_floor > 0) {
    double energy = 0;
    int64_t nonzero = 0;
    for (double e : row_energy)
      if (e > 0) energy += e, ++nonzero;
    den_min = nonzero ? cmp.row_floor * energy / static_cast<double>(nonzero) : 0.0;
  }
  double num_all = 0, den_all = 0, worst_row = 0;
  int64_t worst_row_at = -1;
  for (int64_t r = 0; r < rows; ++r) {
    const double num_r = row_err[static_cast<size_t>(r)], den_r = row_energy[static_cast<size_t>(r)];
    if (cmp.row_floor > 0 && den_r == 0 && num_r != 0) {
      v.ok = false;
      v.error = std::numeric_limits<double>::infinity();
      v.tolerance = cmp.tol_row;
      v.what = name + " row " + row_index(ref, r) + " is not zero (reference: all zeros)";
      return v;
    }
    num_all += num_r;
    den_all += den_r;
    const double e = ratio_of(num_r, std::max(den_r, den_min));
    if (e > worst_row || worst_row_at < 0) {
      worst_row = e;
      worst_row_at = r;
    }
  }
  const double global = ratio_of(num_all, den_all);
  const double rg = ratio_of(global, cmp.tol_global), rr = ratio_of(worst_row, cmp.tol_row);
  if (rg >= rr) {
    v.error = global;
    v.tolerance = cmp.tol_global;
    v.what = name + " global NMSE " + num(global);
  } else {
    v.error = worst_row;
    v.tolerance = cmp.tol_row;
    v.what = name + " row " + row_index(ref, worst_row_at) + " NMSE " + num(worst_row);
  }
  v.ok = global <= cmp.tol_global && worst_row <= cmp.tol_row;
  if (!v.ok) v.what += " > " + num(v.tolerance);
  return v;
}

Verdict compare_lse(const std::string& name, const hal::HostTensor& got, const hal::HostTensor& ref,
                    const Compare& cmp) {
  Verdict v;
  v.tolerance = cmp.tol_global;
  const int64_t n = ref.numel();
  int64_t worst_at = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double a = got.get(static_cast<size_t>(i)), b = ref.get(static_cast<size_t>(i));
    std::string bad;
    if (cmp.nan_rows && std::isnan(b)) {
      if (std::isnan(a)) continue;
      bad = "reference NaN";
    } else if (std::isnan(a))
      bad = "NaN";
    else if (std::isinf(b) || std::isinf(a)) {
      if (a != b) bad = "infinity mismatch";
    }
    if (!bad.empty()) {
      v.ok = false;
      v.error = std::numeric_limits<double>::infinity();
      v.what = name + flat_index(ref, i) + " = " + num(a) + ", reference " + num(b) + " (" + bad + ")";
      return v;
    }
    if (std::isinf(b)) continue;
    const double e = std::fabs(a - b) / std::max(1.0, std::fabs(b));
    if (e > v.error || worst_at < 0) {
      v.error = e;
      worst_at = i;
    }
  }
  v.ok = v.error <= v.tolerance;
  v.what = name + " max rel. error " + num(v.error);
  if (worst_at >= 0) {
    v.what += " at " + flat_index(ref, worst_at) + " (" + num(got.get(static_cast<size_t>(worst_at))) + " vs " +
              num(ref.get(static_cast<size_t>(worst_at))) + ")";
  }
  if (!v.ok) v.what += " > " + num(v.tolerance);
  return v;
}

Verdict compare_exact(const std::string& name, const hal::HostTensor& got, const hal::HostTensor& ref) {
  Verdict v;
  const size_t es = hal::dtype_size(ref.dtype);
  const int64_t n = ref.numel();
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::memcmp(got.bytes.data() + i * es, ref.bytes.data() + i * es, es) != 0) {
      if (first < 0) first = i;
      ++mismatches;
    }
  }
  v.error = static_cast<double>(mismatches);
  v.ok = mismatches == 0;
  v.what = name + " " + std::to_string(mismatches) + " of " + std::to_string(n) + " elements differ";
  if (first >= 0) {
    auto show = [&](const hal::HostTensor& t) {
      return ref.dtype == hal::DType::i32 ? std::to_string(t.data<int32_t>()[first])
                                          : num(t.get(static_cast<size_t>(first)));
    };
    v.what += " (first " + flat_index(ref, first) + ": " + show(got) + " vs " + show(ref) + ")";
  }
  return v;
}

}  // namespace

double Verdict::ratio() const { return ratio_of(error, tolerance); }

Verdict compare_tensors(const std::string& name, const hal::HostTensor& got, const hal::HostTensor& ref,
                        const Compare& cmp) {
  switch (cmp.metric) {
    case Metric::nmse:
      return compare_nmse(name, got, ref, cmp);
    case Metric::lse:
      return compare_lse(name, got, ref, cmp);
    case Metric::exact:
      return compare_exact(name, got, ref);
    case Metric::none:
      break;
  }
  return {};
}

}  // namespace msa::cases
