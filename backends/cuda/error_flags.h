// The device-side validation flag: an int[2] in device memory owned by each device.
// Kernels that find invalid index data (page ids, lengths, token ids...) skip the bad
// entry and call raise_flag(); Stream::synchronize() reads, clears and reports it as
// msa::Error naming the op and the argument. word 0: OR of the bits below; word 1: 1 +
// the OpId of the first op that raised one.
#pragma once
#include "backends/cuda/vendor.h"

namespace msa::MSA_GPU_NS {

enum ErrorBit : unsigned {
  kErrPageId = 1u << 0,        // block_table entry outside [0, P)
  kErrKvLen = 1u << 1,         // kv_len < q_len, < 0, or > max_blocks * Bs
  kErrCuQ = 1u << 2,           // cu_q not 0-based, decreasing, or past T
  kErrTokenId = 1u << 3,       // embedding id outside [0, V)
  kErrPlaceholders = 1u << 4,  // scatter_visual: placeholder count != Nv
  kErrItems = 1u << 5,         // patch_attention_3d: bad grid or total != N
  kErrNQ = 1u << 6,            // the query blocks implied by cu_q/kv_len != NQ
};

// One line per bit: the argument and what was wrong.
inline const char* error_bit_text(unsigned bit) {
  switch (bit) {
    case kErrPageId:
      return "argument 'block_table': page id out of range [0, P)";
    case kErrKvLen:
      return "argument 'kv_len': length < q_len or > max_blocks * Bs";
    case kErrCuQ:
      return "argument 'cu_q': not 0-based, decreasing, or not ending at T";
    case kErrTokenId:
      return "argument 'ids': token id out of range [0, V)";
    case kErrPlaceholders:
      return "argument 'vis': placeholder count in 'tokens' differs from Nv";
    case kErrItems:
      return "argument 'items': grid dimension < 1 or patches do not sum to N";
    case kErrNQ:
      return "argument 'NQ': differs from the query blocks implied by cu_q and kv_len";
    default:
      return "unknown device-side error";
  }
}

#if defined(__CUDACC__) || defined(__HIPCC__)
// Sets `bit` in the flag and remembers the first op that raised one.
__device__ inline void raise_flag(int* flag, unsigned bit, int op) {
  atomicOr(reinterpret_cast<unsigned*>(flag), bit);
  atomicCAS(flag + 1, 0, op + 1);
}
#endif

}  // namespace msa::MSA_GPU_NS
