// The device ceilings msa-bench reports fractions of, measured once per run in the same
// process (docs/perf-targets.md): bandwidth (read + write bytes per second) and
// arithmetic rate (FLOP per second; 0 when not measured).
#pragma once
#include <string>

#include "hal/device.h"

namespace msa::bench {

struct Ceiling {
  double bytes_per_s = 0;  // CPU: all-thread memcpy; GPU: device-to-device Stream::copy
  double flops_per_s = 0;  // CPU: all-thread f32 FMA loop; GPU: bf16 8192^3 ops::matmul
  std::string how;         // what was measured, for the log
};

Ceiling measure_ceiling(hal::Device& dev);

}  // namespace msa::bench
