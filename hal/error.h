// msa::Error: the one exception type of msa. Every failure a user can cause (bad shapes,
// bad files, an absent device, a device-side validation flag) becomes one of these,
// naming the argument or resource and what was wrong. The CLI maps it to exit code 2.
#pragma once
#include <stdexcept>
#include <string>

namespace msa {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// An Error caused by one argument of a call (a shape, dtype, value or file the caller
// gave), as opposed to a device or resource failure. Bindings map it to ValueError.
class ArgError : public Error {
 public:
  using Error::Error;
};

// Throws msa::ArgError("<where>: argument '<arg>': <what>").
[[noreturn]] void throw_arg_error(const std::string& where, const std::string& arg,
                                  const std::string& what);

}  // namespace msa

// Checks a condition on a named argument; `msg` may use operator+ on std::string.
#define MSA_CHECK_ARG(cond, where, arg, msg)                          \
  do {                                                                \
    if (!(cond)) ::msa::throw_arg_error((where), (arg), (msg));       \
  } while (0)
