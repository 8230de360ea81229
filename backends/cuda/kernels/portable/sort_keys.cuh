// A device-wide ascending sort of distinct 64-bit keys (bitonic network): tiles of
// kSortTile keys are sorted and merged in shared memory, only the merge steps with a
// stride of a tile or more go through global memory (one launch each). The result of a
// sort of distinct keys does not depend on scheduling, which is what the training
// kernels' inverse index needs (the key carries the entry id below the bucket).
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {

inline constexpr int kSortTile = 2048;  // keys per shared-memory tile (16 KiB)
inline constexpr int kSortThreads = 256;

// Smallest key count sort_keys takes for n keys: a power of two, at least one tile.
inline int64_t sort_capacity(int64_t n) {
  int64_t c = kSortTile;
  while (c < n) c <<= 1;
  return c;
}

namespace sort_detail {

__device__ __forceinline__ void order_pair(uint64_t& a, uint64_t& b, bool ascending) {
  if ((a > b) == ascending) {
    const uint64_t t = a;
    a = b;
    b = t;
  }
}

// The steps j = j0, j0/2, .., 1 of stage k on this block's tile (all of them fit in it):
// every stage k <= kSortTile when kWholeSort, else the tail of one stage k. (Templates,
// as every kernel defined in a header here: no duplicate symbols across kernel files.)
template <bool kWholeSort, int kThreads>
__global__ void __launch_bounds__(kThreads) tile_kernel(uint64_t* keys, int64_t k_outer) {
  __shared__ uint64_t s[kSortTile];
  const int64_t base = int64_t{blockIdx.x} * kSortTile;
  for (int i = threadIdx.x; i < kSortTile; i += blockDim.x) s[i] = keys[base + i];
  __syncthreads();
  const int64_t k_first = kWholeSort ? 2 : k_outer, k_last = kWholeSort ? kSortTile : k_outer;
  for (int64_t k = k_first; k <= k_last; k <<= 1) {
    for (int j = static_cast<int>(k < kSortTile ? k : kSortTile) >> 1; j > 0; j >>= 1) {
      for (int p = threadIdx.x; p < kSortTile / 2; p += blockDim.x) {
        const int i = 2 * j * (p / j) + p % j;
        order_pair(s[i], s[i + j], ((base + i) & k) == 0);
      }
      __syncthreads();
    }
  }
  for (int i = threadIdx.x; i < kSortTile; i += blockDim.x) keys[base + i] = s[i];
}

// One step (stride j >= kSortTile) of stage k over all n keys.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) step_kernel(uint64_t* keys, int64_t n, int64_t k, int64_t j) {
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < n / 2; p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = 2 * j * (p / j) + p % j;
    uint64_t a = keys[i], b = keys[i + j];
    order_pair(a, b, (i & k) == 0);
    keys[i] = a;
    keys[i + j] = b;
  }
}

}  // namespace sort_detail

// Sorts keys[0, n) ascending; n = sort_capacity(..) (pad with ~0ull).
inline void sort_keys(Stream& st, uint64_t* keys, int64_t n) {
  const unsigned tiles = static_cast<unsigned>(n / kSortTile);
  sort_detail::tile_kernel<true, kSortThreads><<<tiles, kSortThreads, 0, st.native()>>>(keys, 0);
  MSA_CUDA_CHECK_LAUNCH();
  for (int64_t k = 2 * kSortTile; k <= n; k <<= 1) {
    for (int64_t j = k >> 1; j >= kSortTile; j >>= 1) {
      sort_detail::step_kernel<kSortThreads>
          <<<grid_for(n / 2, kSortThreads, st.props()), kSortThreads, 0, st.native()>>>(keys, n, k, j);
      MSA_CUDA_CHECK_LAUNCH();
    }
    sort_detail::tile_kernel<false, kSortThreads><<<tiles, kSortThreads, 0, st.native()>>>(keys, k);
    MSA_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace msa::MSA_GPU_NS
