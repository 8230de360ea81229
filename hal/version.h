// msa::version(): the library's version, "MAJOR.MINOR.PATCH" (the CMake project VERSION,
// the one place it is set). `msa --version` prints it and the Python package's
// msa.__version__ is it; CHANGELOG.md has an entry for it.
#pragma once

#include "hal/export.h"

namespace msa {

// The version of the libmsa that is loaded (not of the headers compiled against).
MSA_API const char* version() noexcept;

}  // namespace msa
