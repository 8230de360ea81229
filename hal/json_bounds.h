// JSON read from files (safetensors headers, config.json) under fixed bounds: parsing
// rejects NUL bytes, nesting deeper than kMaxJsonDepth and a key repeated in one object,
// so a parsed value is shallow enough to walk recursively; json_excerpt gives a short,
// depth-limited rendering of a value for error messages.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace msa::hal {

// Deepest nesting of arrays and objects a parsed document may have.
constexpr int kMaxJsonDepth = 64;

// Parses `text` as one JSON document. Throws msa::Error "<label> is not valid JSON: ..."
// for a syntax error or a NUL byte (the parser would stop there and ignore what
// follows), "<label> nests ..." past kMaxJsonDepth, "<label> has the key ... twice" for
// a key repeated inside one object.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& label);

// `v` as JSON text of at most `max_chars` characters ("..." marks a cut; containers
// nested more than four levels print as [...] / {...}; NaN and infinities as nan, inf).
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 80);

}  // namespace msa::hal
