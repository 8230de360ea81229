// A one-launch self-check run when a HIP device is opened: the wavefront the kernels were
// compiled for must be the one the hardware runs, and a wave-wide reduction and ballot
// must see every lane (wave_check.cu, compiled by hipcc like the kernels).
#pragma once
#include "backends/cuda/vendor.h"

namespace msa::hip {

struct WaveReport {
  int hw_warp = 0;       // warpSize seen by device code
  int kernel_warp = 0;   // kWarp (MSA_WARP_SIZE) the code object was compiled with
  int lane_sum = 0;      // warp_sum_int(lane) over wave 0: W(W-1)/2 when all lanes take part
  int ballot_lanes = 0;  // popcount of a full-wave ballot: W
};

// Launches the check on `stream` (current device), waits, and returns what it saw.
// Throws msa::Error when the launch fails (e.g. no code object for this architecture).
WaveReport run_wave_check(hipStream_t stream);

}  // namespace msa::hip
