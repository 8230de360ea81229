// The kernel table of the portable tier (kernels/portable/<op>.cu), shared by the CUDA
// and HIP backends and the CPU emulation (tests/hip). What differs between vendors is
// data: VendorLimits, and which portable kernels the build compiled (the generated
// msa_portable_ops.h, see portable_ops.cmake).
#pragma once
#include <cstdint>

#include "backends/cuda/vendor.h"
#include "hal/dtype.h"
#include "hal/kernel_table.h"

namespace msa::MSA_GPU_NS {

struct VendorLimits {
  // Shared memory one block may use, in bytes; 0 = no limit below what the kernels ask for
  // (CUDA: the opt-in covers every layout). AMD CDNA 1-3: 64 KiB of LDS per workgroup.
  int64_t shared_memory_bytes = 0;
  // With shared_memory_bytes: the bytes of shared memory the attention kernels' layout
  // takes for (dtype, head dim D <= 128), read from the device code that owns the layout.
  int64_t (*attention_shared_bytes)(hal::DType dt, int64_t D) = nullptr;
  // What the shared-memory limit is called in refusals, e.g. "an AMD workgroup has 65536
  // bytes of LDS".
  const char* shared_memory_name = "";
};

// Every op whose portable kernel is in this build, with the sizes its kernels (or the
// vendor's limits) do not cover refused; the other kernel ops say why they are absent.
// Composite ops have no entry here (a vendor may add its fused kernels).
hal::KernelTable make_portable_table(const VendorLimits& limits);

}  // namespace msa::MSA_GPU_NS
