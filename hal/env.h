// Integer tuning knobs from the environment (kernel switches for A/B runs and
// cross-checks: MSA_CUDA_*, MSA_TOPK_REGISTER, MSA_VK_*), parsed one way everywhere. Unset or
// empty: the default; "off" / "false" / "no" (any case): 0; "on" / "true" / "yes": 1;
// otherwise the whole value must be a decimal integer in [lo, hi]. Anything else
// ("abc", "4x", "1e3", out of range) throws msa::Error naming the variable, rather than
// reading as 0 (which turns a switch off) as std::atoi would. Header-only: the GPU
// backends' host code includes it.
#pragma once
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

#include "hal/error.h"

namespace msa {

inline long long parse_env_int(const char* name, const char* value, long long dflt, long long lo = INT_MIN,
                               long long hi = INT_MAX) {
  if (value == nullptr || *value == '\0') return dflt;
  std::string v(value);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  long long x = 0;
  if (v == "off" || v == "false" || v == "no") {
    x = 0;
  } else if (v == "on" || v == "true" || v == "yes") {
    x = 1;
  } else {
    char* end = nullptr;
    errno = 0;
    x = std::strtoll(value, &end, 10);
    const bool digits = end != value && std::isdigit(static_cast<unsigned char>(end[-1]));
    if (!digits || *end != '\0' || errno == ERANGE || std::isspace(static_cast<unsigned char>(value[0])))
      throw Error(std::string("environment variable ") + name + ": '" + value + "' is not an integer (or on/off)");
  }
  if (x < lo || x > hi)
    throw Error(std::string("environment variable ") + name + ": '" + value + "' is outside [" + std::to_string(lo) +
                ", " + std::to_string(hi) + "]");
  return x;
}

// The knob `name` (see above) as an int; `dflt` when unset or empty.
inline int env_int(const char* name, int dflt) {
  return static_cast<int>(parse_env_int(name, std::getenv(name), dflt));
}

}  // namespace msa
