// Host-side pieces the tensor-core training kernels share (attention_backward_mma.cu,
// indexer_kl_mma.cu): the inverse index of training_index.cuh with its keys sorted by
// CUB's radix sort, the token prefix of its sorted entries (both scanned by CUB), from
// which the KV-block-outer kernels cut their work into items of a fixed token count, and
// the sizes of those items and of the blocks' key chunks.
#pragma once
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma_work.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/training_index.cuh"
#include "hal/env.h"

namespace msa::cuda::bwd {

inline constexpr int kPrepThreads = 256;

// tok[w] = tokens of sorted entry w (0 past the valid ones), tok[N] = 0: scanned in place
// into the token prefix.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) entry_tokens_kernel(InverseIndex inv, int64_t N, int* tok) {
  for (int64_t w = int64_t{blockIdx.x} * kThreads + threadIdx.x; w <= N; w += int64_t{gridDim.x} * kThreads) {
    int n = 0;
    if (w < N) {
      const uint64_t key = inv.order[w];
      if (key != ~uint64_t{0}) {
        const Entry& en = inv.ent[key & 0xffffffffu];
        n = en.t1 - en.t0;
      }
    }
    tok[w] = n;
  }
}
inline void launch_entry_tokens(Stream& st, const InverseIndex& inv, int64_t N, int* tok) {
  entry_tokens_kernel<kPrepThreads>
      <<<grid_for(N + 1, kPrepThreads, st.props()), kPrepThreads, 0, st.native()>>>(inv, N, tok);
  MSA_CUDA_CHECK_LAUNCH();
}

inline void scan_in_place(Stream& st, void* tmp, size_t tmp_bytes, int* data, int n) {
  MSA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp, tmp_bytes, data, n, st.native()));
}
inline size_t scan_bytes(int n) {
  size_t bytes = 0;
  MSA_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<int*>(nullptr), n));
  return bytes;
}

// Bits of the inverse index's keys (bucket << 32 | entry id) to sort by: the buckets'
// values and one more, so the invalid keys (~0: all ones) stay last.
inline int key_bits(int64_t buckets) {
  int b = 0;
  while ((int64_t{1} << b) < buckets + 1) ++b;
  return 32 + b;
}
inline size_t sort_bytes(int n, int end_bit) {
  size_t bytes = 0;
  cub::DoubleBuffer<uint64_t> none(nullptr, nullptr);
  MSA_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, none, n, 0, end_bit));
  return bytes;
}

// The inverse index of build_inverse (training_index.cuh), its keys sorted by CUB's radix
// sort (deterministic: the keys are distinct) into whichever of keys / alt it ends in.
inline InverseIndex inverse_index(Stream& st, const AttendSets& a, int Hb, const IndexPlan& ip, char* ws, uint64_t* alt,
                                  void* tmp, size_t tmp_bytes) {
  auto* ent = reinterpret_cast<Entry*>(ws + ip.ent);
  auto* keys = reinterpret_cast<uint64_t*>(ws + ip.keys);
  auto* begin = reinterpret_cast<int*>(ws + ip.begin);
  launch_entry_keys(st, a, Hb, ip, ent, keys);
  cub::DoubleBuffer<uint64_t> db(keys, alt);
  MSA_CUDA_CHECK(
      cub::DeviceRadixSort::SortKeys(tmp, tmp_bytes, db, static_cast<int>(ip.N), 0, key_bits(ip.buckets), st.native()));
  launch_bucket_begin(st, ip, db.Current(), begin);
  return InverseIndex{ent, db.Current(), begin};
}

}  // namespace msa::cuda::bwd
