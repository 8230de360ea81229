// For a test program that links a backend's static library to call its internals
// (tests/cuda: cuda::Stream and its counter slots; tests/hip: hip::why_unusable) and, with
// it, the backend's module entry (msa_backend_<name>_entry): the registry opens devices
// through this copy of the backend instead of loading a second one from
// libmsa_backend_<name>.so, whose state (stream slots, device handles) would be apart.
#include "hal/module_loader.h"

namespace {

const bool kLinked = (msa::hal::use_linked_backend_module(*msa_backend_module_v1()), true);

}  // namespace
