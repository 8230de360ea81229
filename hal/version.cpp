#include "hal/version.h"

// MSA_VERSION_STRING comes from CMake (PROJECT_VERSION), on this source file only, so a
// version change rebuilds one file.
#ifndef MSA_VERSION_STRING
#error "MSA_VERSION_STRING must be defined by the build (CMake project VERSION)"
#endif

namespace msa {

const char* version() noexcept { return MSA_VERSION_STRING; }

}  // namespace msa
