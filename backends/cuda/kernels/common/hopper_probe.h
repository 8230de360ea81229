// Whether this build carries the sm_90a (Hopper feature set) code of the Hopper-tier
// kernels for a device. A build for sm_90 without the "a", or one that reaches an H100/H200
// only through PTX of an older architecture, compiles those kernels' bodies to a trap: the
// launchers ask here first and leave the work to the other tiers.
#pragma once

namespace msa::cuda {

// Cached per device ordinal; no launch, so it is safe inside a stream capture.
bool hopper_code_present(int device);

}  // namespace msa::cuda
