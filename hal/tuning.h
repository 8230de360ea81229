// A backend's kernel-choice settings ("tuning"): a plain struct of int fields, described by
// a table of knobs. A knob with an environment variable is a user-facing switch, read once
// when the device opens; a knob without one is a test hook (forced split counts and the
// like), set only through hal::Device::set_tuning (tests, `msa check --tuning`). No knob
// changes what an op computes, only which kernel computes it. Header-only: the GPU
// backends' host code includes it.
#pragma once
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hal/env.h"
#include "hal/error.h"

namespace msa::hal {

// One knob as `msa devices` shows it.
struct TuningEntry {
  std::string name;   // "decode"
  int value = 0;      // current
  int dflt = 0;       // default
  std::string env;    // "MSA_CUDA_DECODE"; "" for a test hook
  std::string shown;  // the value as text ("portable", "2")
  std::string help;   // what the values mean
};

template <typename T>
struct Knob {
  const char* name;
  const char* env;  // nullptr: a test hook, not read from the environment
  int T::*field;
  int dflt, lo, hi;
  const char* help;
  // Optional names of the values lo..hi ({"portable", "native"}); numbers are accepted too.
  std::span<const char* const> value_names = {};
};

namespace tuning_detail {

template <typename T>
int parse_value(const Knob<T>& k, std::string_view what, std::string_view text) {
  for (size_t i = 0; i < k.value_names.size(); ++i)
    if (text == k.value_names[i]) return k.lo + static_cast<int>(i);
  const std::string t(text);
  if (t.empty()) throw Error(std::string(what) + ": the value is empty");
  return static_cast<int>(parse_env_int(std::string(what).c_str(), t.c_str(), k.dflt, k.lo, k.hi));
}

template <typename T>
std::string show_value(const Knob<T>& k, int v) {
  const int i = v - k.lo;
  if (i >= 0 && static_cast<size_t>(i) < k.value_names.size()) return k.value_names[i];
  return std::to_string(v);
}

}  // namespace tuning_detail

// Defaults, then the environment variables of the user-facing knobs.
template <typename T>
T tuning_from_env(std::span<const Knob<T>> knobs) {
  T t{};
  for (const auto& k : knobs) {
    t.*k.field = k.dflt;
    if (k.env == nullptr) continue;
    const char* v = std::getenv(k.env);
    if (v != nullptr && *v != '\0')
      t.*k.field = tuning_detail::parse_value(k, std::string("environment variable ") + k.env, v);
  }
  return t;
}

// Sets knob `name` from `value` (a number, on/off, or one of its value names); ArgError
// naming the knob when it does not exist or the value is out of its range.
template <typename T>
void set_tuning_knob(T& t, std::span<const Knob<T>> knobs, const std::string& device, std::string_view name,
                     std::string_view value) {
  for (const auto& k : knobs) {
    if (name != k.name) continue;
    try {
      t.*k.field = tuning_detail::parse_value(k, std::string("tuning knob ") + k.name, value);
    } catch (const Error& e) {
      throw ArgError(device + ": argument 'tuning': " + e.what());
    }
    return;
  }
  std::string all;
  for (const auto& k : knobs) all += std::string(all.empty() ? "" : ", ") + k.name;
  throw ArgError(device + ": argument 'tuning': no knob '" + std::string(name) +
                 "' (this device has: " + (all.empty() ? "none" : all) + ")");
}

template <typename T>
std::vector<TuningEntry> list_tuning(const T& t, std::span<const Knob<T>> knobs) {
  std::vector<TuningEntry> out;
  for (const auto& k : knobs)
    out.push_back({k.name, t.*k.field, k.dflt, k.env ? k.env : "", tuning_detail::show_value(k, t.*k.field), k.help});
  return out;
}

}  // namespace msa::hal
