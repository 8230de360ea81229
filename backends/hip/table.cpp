// The HIP backend's kernel table: the portable tier's (backends/cuda/portable_table.h)
// under AMD's limit: a workgroup has 64 KiB of LDS (CDNA 1-3), so a kernel whose shared
// memory does not fit is refused rather than failing at launch. Compiled as device code
// (hipcc, or the CPU emulation) to read the attention kernels' shared-memory layout.
#include "backends/hip/table.h"

#include <cstdint>

#include "backends/cuda/kernels/portable/attention_launch.cuh"
#include "backends/cuda/portable_table.h"

namespace msa::MSA_GPU_NS {
namespace {

// Shared memory per workgroup on AMD CDNA 1-3 (MI100 to MI300).
constexpr int64_t kLdsBytes = 64 * 1024;

int64_t attention_layout_bytes(hal::DType dt, int64_t D) {
  int64_t bytes = 0;
  MSA_DISPATCH_ACT(dt, DT, MSA_DISPATCH_DP(D, DP, bytes = AttnLayout<DT, DP>::BYTES));
  return bytes;
}

}  // namespace

hal::KernelTable make_kernel_table() {
  VendorLimits v;
  v.shared_memory_bytes = kLdsBytes;
  v.attention_shared_bytes = &attention_layout_bytes;
  v.shared_memory_name = "an AMD workgroup has 65536 bytes of LDS";
  return make_portable_table(v);
}

}  // namespace msa::MSA_GPU_NS
