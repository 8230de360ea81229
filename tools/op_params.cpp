#include "tools/op_params.h"

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "hal/error.h"

namespace msa::cli {

OpParams::OpParams(const std::vector<std::string>& pairs) {
  for (const auto& p : pairs) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("argument '--param': '" + clip(p) + "' is not of the form key=value");
    const std::string key = p.substr(0, eq);
    if (!values_.emplace(key, p.substr(eq + 1)).second) throw Error("argument '--param': '" + key + "' given twice");
  }
}

long long OpParams::get_int(const std::string& key, long long fallback) {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno != 0 || end == it->second.c_str() || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
    throw Error("argument '--param " + key + "': '" + clip(it->second) + "' is not a 32-bit integer");
  return v;
}

float OpParams::get_float(const std::string& key, float fallback) {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  const std::string arg = "argument '--param " + key + "': '" + clip(it->second) + "'";
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v)) throw Error(arg + " is not a finite number");
  // The op takes a float: the value must survive the conversion (no overflow to inf, no
  // underflow to 0 or a denormal, which strtod also flags with ERANGE).
  const double a = std::fabs(v);
  if (errno == ERANGE || (a != 0.0 && (a < FLT_MIN || a > FLT_MAX))) {
    char range[64];
    std::snprintf(range, sizeof range, "[%.9g, %.9g]", FLT_MIN, FLT_MAX);
    throw Error(arg + " does not survive the conversion to float: its magnitude must be 0 or in " + range);
  }
  return static_cast<float>(v);
}

float OpParams::get_nonzero_float(const std::string& key) {
  if (!has(key)) return 0.0f;
  const float v = get_float(key, 0.0f);
  if (v == 0.0f)
    throw Error("argument '--param " + key + "': 0 is not a value of " + key +
                " (leave the parameter out for its default)");
  return v;
}

std::string OpParams::get_str(const std::string& key, const std::string& fallback) {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  return it->second;
}

void OpParams::check_all_used(const std::string& op) const {
  for (const auto& [k, v] : values_)
    if (!used_.count(k)) throw Error("argument '--param " + k + "': not a parameter of op " + op);
}

}  // namespace msa::cli
