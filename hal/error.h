// msa::Error: the one exception type of msa. Every failure a user can cause (bad shapes,
// bad files, an absent device, a device-side validation flag) becomes one of these,
// naming the argument or resource and what was wrong. The CLI maps it to exit code 2.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "hal/export.h"

namespace msa {

// Longest message an Error keeps; a longer one is cut (clip) so that no input, however
// large, makes a message of unbounded length.
constexpr size_t kMaxErrorChars = 2048;

// `s` when it has at most `max_chars` characters, else its first `max_chars` (never
// ending inside a UTF-8 sequence) and "...". For names and values quoted in messages.
// (Inline: header-only users of hal/env.h link no msa library.)
inline std::string clip(std::string_view s, size_t max_chars = 64) {
  if (s.size() <= max_chars) return std::string(s);
  size_t n = max_chars;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // s[n] continues a sequence
  return std::string(s.substr(0, n)) + "...";
}

class MSA_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(clip(what, kMaxErrorChars)) {}
};

// An Error caused by one argument of a call (a shape, dtype, value or file the caller
// gave), as opposed to a device or resource failure. Bindings map it to ValueError.
class MSA_API ArgError : public Error {
 public:
  using Error::Error;
};

// Throws msa::ArgError("<where>: argument '<arg>': <what>").
[[noreturn]] MSA_API void throw_arg_error(const std::string& where, const std::string& arg, const std::string& what);

}  // namespace msa

// Checks a condition on a named argument; `msg` may use operator+ on std::string.
#define MSA_CHECK_ARG(cond, where, arg, msg)                    \
  do {                                                          \
    if (!(cond)) ::msa::throw_arg_error((where), (arg), (msg)); \
  } while (0)
