// block_topk's kernels (block_topk.cu, CUDA's and HIP's alike) and the one function that
// picks among them from the call's rows, the device and its Tuning. Header-only plain
// C++: HIP compiles it with the kernels, tests/cuda_choose without a GPU.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cuda/tuning.h"

namespace msa::MSA_GPU_NS {

// The register paths: one block of kTopkSplitThreads threads holds <= kTopkSplitMaxPer
// keys per thread.
inline constexpr int kTopkSplitThreads = 256;
inline constexpr int kTopkSplitMaxPer = 8;
inline constexpr int kTopkSplitMaxKeys = kTopkSplitThreads * kTopkSplitMaxPer;
inline constexpr int kTopkSplitMaxS = 64;      // chunks per row (and S * k <= kTopkSplitMaxKeys: the merge)
inline constexpr int kTopkSplitMaxK = 128;     // k of the split path
inline constexpr int kTopkRowsPerSlot = 4096;  // rows per call on the split path
// The wide path: one block of kTopkWideThreads threads per row, <= kTopkWideMaxPer keys
// per thread in registers.
inline constexpr int kTopkWideThreads = 512;
inline constexpr int kTopkWideMaxPer = 16;
inline constexpr int kTopkWideMaxKeys = kTopkWideThreads * kTopkWideMaxPer;

enum class TopkKernel {
  rows,       // a block per row, keys in shared memory, histogram rounds (any row)
  one_block,  // a block of 256 threads per row, keys in registers: rows of <= 2048 blocks
  split,      // S chunks per row, the last to arrive merges: few long rows
  wide,       // a block of 512 threads per row, keys in registers: many rows of <= 8192 valid blocks
};
inline const char* kernel_name(TopkKernel k) {
  return k == TopkKernel::one_block ? "one_block"
         : k == TopkKernel::split   ? "split"
         : k == TopkKernel::wide    ? "wide"
                                    : "rows";
}

struct TopkPlan {
  TopkKernel kernel = TopkKernel::rows;
  int S = 1;      // chunks per row
  int chunk = 0;  // blocks per chunk
};

// `rows`: NQ x Hs; `n`: blocks per row (block_score's last dim). `slot_free`: the stream
// has one of the split path's arrival counter sets.
inline TopkPlan choose_block_topk(int64_t rows, int n, int k, int sm_count, const Tuning& t, bool slot_free) {
  TopkPlan p;
  if (t.topk_register == 0) return p;
  // Rows of <= 2048 blocks, any number of them (a serving batch's multi-token decode:
  // B = 128, q_len 8 0.244 vs 0.643 ms on the row kernel, H200; prefill chunks up to 256K).
  if (n <= kTopkSplitMaxKeys) {
    p.kernel = TopkKernel::one_block;
    p.chunk = n;
    return p;
  }
  // Few long rows (decode): chunks of ~512 blocks (2 keys per thread), fewer where the
  // merge (S x k candidates) would not fit.
  const bool few_rows = rows <= 2 * int64_t{sm_count};
  const bool split_ok = few_rows && k <= kTopkSplitMaxK && rows <= kTopkRowsPerSlot && slot_free;
  const int S = std::min({kTopkSplitMaxS, (n + 511) / 512, kTopkSplitMaxKeys / std::max(k, 1)});
  const int chunk = S >= 2 ? (n + S - 1) / S : 0;
  if (!split_ok || S < 2 || chunk > kTopkSplitMaxKeys) {
    // More rows (prefill chunks: 8K x 4 rows): one wide block per row, the rows of more
    // than 8192 valid blocks then on the row kernel.
    p.kernel = TopkKernel::wide;
    p.chunk = std::min(n, kTopkWideMaxKeys);
    return p;
  }
  p.kernel = TopkKernel::split;
  p.S = S;
  p.chunk = chunk;
  return p;
}

}  // namespace msa::MSA_GPU_NS
