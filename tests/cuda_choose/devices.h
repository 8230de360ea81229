// The devices and shapes the chooser tests route: an H100/H200 (sm_90a, 132 SMs), an A100
// (sm_80) and an RTX 30-series part (sm_86, 99 KiB of shared memory per block), and
// MiniMax-M3 attention (Hq 64, Hkv 4, D 128, Hi 4, Di 128, Bs 128, k 16, bf16).
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "hal/tuning.h"

namespace msa::cuda::test {

inline DeviceProps sm90() {
  DeviceProps p;
  p.name = "NVIDIA H200";
  p.sm_count = 132;
  p.cc_major = 9;
  p.smem_optin = 227 * 1024;
  p.hopper_code = true;
  return p;
}
inline DeviceProps sm80() {
  DeviceProps p;
  p.name = "NVIDIA A100";
  p.sm_count = 108;
  p.cc_major = 8;
  p.smem_optin = 163 * 1024;
  return p;
}
inline DeviceProps sm86() {
  DeviceProps p;
  p.name = "NVIDIA GeForce RTX 3090";
  p.sm_count = 82;
  p.cc_major = 8;
  p.cc_minor = 6;
  p.smem_optin = 99 * 1024;
  return p;
}

// The defaults of every knob (not the environment's).
inline Tuning defaults() {
  Tuning t;
  for (const auto& k : kTuningKnobs) t.*k.field = k.dflt;
  return t;
}
// The defaults with knob `name` at `value` (a knob of kTuningKnobs: a typo fails).
inline Tuning with(std::string_view name, int value) {
  Tuning t = defaults();
  for (const auto& k : kTuningKnobs)
    if (name == k.name) {
      t.*k.field = value;
      return t;
    }
  throw std::invalid_argument(std::string("no knob ") + std::string(name));
}

// Compares kernels by name, so that a failure says which one was picked.
#define EXPECT_KERNEL(expr, kernel) EXPECT_STREQ(kernel_name(expr), kernel_name(kernel))

// M3.
inline constexpr int kHq = 64, kHkv = 4, kD = 128, kHi = 4, kDi = 128, kBs = 128, kK = 16;

}  // namespace msa::cuda::test
