// Host helpers of the attention kernels: split-KV choice, workspace carving, dynamic
// shared memory opt-in, and the merge launch.
#pragma once
#include <algorithm>
#include <cmath>

#include "backends/cuda/kernels/portable/attention_core.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {

// Number of KV splits: enough blocks to fill the GPU (~3 per SM), at most `units` (so no
// split is empty), and a partial buffer of at most 512 MiB.
inline int choose_splits(int64_t base_blocks, int64_t units, int64_t rows, int64_t D, const DeviceProps& p) {
  if (units <= 1 || base_blocks <= 0) return 1;
  int64_t S = std::clamp<int64_t>((3 * int64_t{p.sm_count} + base_blocks - 1) / base_blocks, 1, units);
  const int64_t per = (units + S - 1) / S;
  S = (units + per - 1) / per;
  while (S > 1 && S * rows * (D + 1) * 4 > (int64_t{512} << 20)) --S;
  return static_cast<int>(S);
}

// Split partials in the stream's workspace.
inline void split_buffers(Stream& st, int S, int64_t rows, int64_t D, AttnOut& o) {
  char* ws = static_cast<char*>(st.workspace(static_cast<size_t>(S * rows * (D + 1)) * sizeof(float) + 256));
  o.part_o = reinterpret_cast<float*>(ws);
  o.part_lse = o.part_o + S * rows * D;
  o.rows_total = rows;
}

template <int DT>
void launch_merge(Stream& st, const AttnOut& o, int S, int64_t rows, int D, void* out, float* lse) {
  using T = typename Elem<DT>::T;
  constexpr int kThreads = 256;
  const int64_t blocks = (rows * kWarp + kThreads - 1) / kThreads;
  attn_merge_kernel<DT><<<static_cast<unsigned>(blocks), kThreads, 0, st.native()>>>(o.part_o, o.part_lse, S, rows, D,
                                                                                     static_cast<T*>(out), lse);
  MSA_CUDA_CHECK_LAUNCH();
}

// Runs BODY with `constexpr int DP` = 64 or 128 (padded head dim) for head dim D.
#define MSA_DISPATCH_DP(D, DP, ...) \
  if ((D) <= 64) {                  \
    constexpr int DP = 64;          \
    __VA_ARGS__;                    \
  } else {                          \
    constexpr int DP = 128;         \
    __VA_ARGS__;                    \
  }

}  // namespace msa::MSA_GPU_NS
