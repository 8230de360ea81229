#include "hal/error.h"

namespace msa {

void throw_arg_error(const std::string& where, const std::string& arg, const std::string& what) {
  throw ArgError(where + ": argument '" + arg + "': " + what);
}

}  // namespace msa
