// Why a CUDA test cannot run here ("" when a CUDA device exists): for GTEST_SKIP.
#pragma once
#include <string>

#include "hal/registry.h"

namespace msa::test {

inline std::string no_cuda_device() {
  for (const auto& s : hal::list_backends())
    if (s.name == "cuda") {
      if (!s.compiled) return "cuda backend not compiled in";
      if (s.devices.empty()) return "no CUDA device: " + s.unavailable_reason;
      return "";
    }
  return "cuda is unknown to the registry";
}

}  // namespace msa::test
