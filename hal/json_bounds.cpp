#include "hal/json_bounds.h"

#include <cmath>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/error.h"

namespace msa::hal {
namespace {

using nlohmann::json;

constexpr int kExcerptDepth = 4;

// Appends `v` to `out` until `out` reaches `budget` characters (the caller cuts there).
void put(const json& v, std::string& out, size_t budget, int depth) {
  if (out.size() >= budget) return;
  if (v.is_array() || v.is_object()) {
    const bool obj = v.is_object();
    if (depth >= kExcerptDepth && !v.empty()) {
      out += obj ? "{...}" : "[...]";
      return;
    }
    out += obj ? '{' : '[';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() < budget; ++it) {
      if (!first) out += ", ";
      first = false;
      if (obj) {
        put(json(clip(it.key(), budget)), out, budget, depth + 1);
        out += ": ";
      }
      put(*it, out, budget, depth + 1);
    }
    out += obj ? '}' : ']';
  } else if (v.is_string()) {
    out += json(clip(v.get_ref<const std::string&>(), budget)).dump(-1, ' ', false, json::error_handler_t::replace);
  } else if (v.is_number_float() && !std::isfinite(v.get<double>())) {
    out += std::isnan(v.get<double>()) ? "nan" : v.get<double>() > 0 ? "inf" : "-inf";
  } else {
    out += v.dump();
  }
}

}  // namespace

json parse_json_bounded(std::string_view text, const std::string& label) {
  const size_t nul = text.find('\0');
  if (nul != std::string_view::npos)
    throw Error(label + " is not valid JSON: it holds a NUL byte at offset " + std::to_string(nul));
  std::vector<std::set<std::string>> keys;  // keys seen in each open object
  auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth)
          throw Error(label + " nests arrays and objects deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second)
          throw Error(label + " has the key " + json_excerpt(parsed) + " twice in one object");
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), guard);
  } catch (const json::exception& e) {
    throw Error(label + " is not valid JSON: " + clip(e.what(), 200));
  }
}

std::string json_excerpt(const json& v, size_t max_chars) {
  std::string out;
  put(v, out, max_chars + 1, 0);
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

}  // namespace msa::hal
