// Shared by the determinism tests: which backends have a device here, and running one
// case of the cross-check library (check/) on a device to collect its raw outputs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "check/case.h"
#include "hal/device.h"
#include "hal/host_tensor.h"

namespace msa_test {

// Every backend msa knows; the tests are instantiated for each and skip the absent ones.
inline const std::vector<std::string> kBackends = {"cpu-ref", "cpu", "cuda", "hip", "vulkan"};

// "" when `backend` is compiled in and has a device, else why not (for GTEST_SKIP).
std::string unavailable(const std::string& backend);

// The outputs of one run of case `c` (inputs of seed `seed`) on `dev`: one entry per
// output slot, raw bytes as downloaded. `skipped` is set to the device's reason when it
// refuses the case.
struct Outputs {
  std::string skipped;
  std::vector<std::string> names;
  std::vector<msa::hal::HostTensor> tensors;
};
Outputs run_case(const msa::cases::Case& c, msa::hal::Device& dev, uint64_t seed);

// "" when a and b are bitwise identical, else the first differing output and element.
std::string bitwise_diff(const Outputs& a, const Outputs& b);

}  // namespace msa_test
