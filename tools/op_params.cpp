#include "tools/op_params.h"

#include <cerrno>
#include <cstdint>
#include <cmath>
#include <cstdlib>

#include "hal/error.h"

namespace msa::cli {

OpParams::OpParams(const std::vector<std::string>& pairs) {
  for (const auto& p : pairs) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("argument '--param': '" + p + "' is not of the form key=value");
    const std::string key = p.substr(0, eq);
    if (!values_.emplace(key, p.substr(eq + 1)).second)
      throw Error("argument '--param': '" + key + "' given twice");
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
    throw Error("argument '--param " + key + "': '" + it->second + "' is not a 32-bit integer");
  return v;
}

double OpParams::get_float(const std::string& key, double fallback) {
  auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  used_.insert(key);
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v))
    throw Error("argument '--param " + key + "': '" + it->second + "' is not a finite number");
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
