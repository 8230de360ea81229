// The one-thread-block select of block_topk's register paths (block_topk.cu), shared with
// the decode indexer's fused select: each thread holds PER keys (ordered_key of the scores;
// 0: not a candidate, 0xffffffff: a forced block), the k largest are taken, equal keys
// going to the lower position, then written in position order. Blocks of at least
// kSelBins threads (a thread per histogram bin), at most the scratch's size.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/portable/seq.cuh"

namespace msa::MSA_GPU_NS {

constexpr int kSelBins = 256;  // 8-bit radix digits: the fewest threads a block may have

// Sized for blocks of at most kMaxThreads threads (its per-warp arrays).
template <int kMaxThreads = kSelBins>
struct SelScratch {
  static_assert(kMaxThreads >= kSelBins, "one bin per thread");
  int hist[2 * kSelBins];  // the select alternates halves (one barrier less per pass)
  int scan[kMaxThreads / kWarp + 1];
  uint32_t wmin[kMaxThreads / kWarp], wmax[kMaxThreads / kWarp];
  int wforced[kMaxThreads / kWarp];
  int found_bin, found_above, found_cnt;
};

// Thread t holds the keys of positions t * PER .. t * PER + PER - 1 (0 = no candidate).
// Returns, as a bit per key, whether it is among the `k` largest keys of the block, equal
// keys going to the lower position. Call with every thread. Exact: a radix select whose
// 256 bins per pass cover the current key range [lo, hi] (the candidates' min and max at
// first; bin = (key - lo) >> shift), not a fixed byte of the key, so the scores' few
// leading exponent values do not put most keys into one or two bins (one shared-memory
// atomic queue), and the select stops as soon as the bin holding the k-th largest key is
// taken whole. (Four fixed 8-bit passes are 1.4x slower: docs/performance.md.)
// The largest keys are sparse in their bins, so a row of ~1K scores and k = 16 usually
// ends after one pass; the worst case stays 4 passes (8 bits of range each). The two
// histogram halves alternate, so the clear needs no barrier of its own.
// Forced blocks (key 0xffffffff, at most k of them) are counted apart and kept out of the
// range: otherwise the first pass would span from the scores up to 0xffffffff and put
// every score into one or two bins (the local-window block of every decode row).
template <int PER, int T>
__device__ unsigned select_top(const uint32_t (&key)[PER], int k, SelScratch<T>& sc) {
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp, nw = blockDim.x / kWarp;
  int mine = 0, forced = 0;
  uint32_t kmin = 0xffffffffu, kmax = 0u;
#pragma unroll
  for (int i = 0; i < PER; ++i)
    if (key[i] == 0xffffffffu) {
      ++forced;
    } else if (key[i] != 0u) {
      ++mine;
      kmin = min(kmin, key[i]);
      kmax = max(kmax, key[i]);
    }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    mine += __shfl_xor_sync(MSA_FULL_MASK, mine, o, kWarp);
    forced += __shfl_xor_sync(MSA_FULL_MASK, forced, o, kWarp);
    kmin = min(kmin, __shfl_xor_sync(MSA_FULL_MASK, kmin, o, kWarp));
    kmax = max(kmax, __shfl_xor_sync(MSA_FULL_MASK, kmax, o, kWarp));
  }
  for (int i = tid; i < 2 * kSelBins; i += blockDim.x) sc.hist[i] = 0;
  __syncthreads();  // the previous select's readers of scan / wmin / wmax are done
  if (lane == 0) {
    sc.scan[warp] = mine;
    sc.wforced[warp] = forced;
    sc.wmin[warp] = kmin;
    sc.wmax[warp] = kmax;
  }
  __syncthreads();
  int nscore = 0, nforced = 0;
  for (int w = 0; w < nw; ++w) {
    nscore += sc.scan[w];
    nforced += sc.wforced[w];
    kmin = min(kmin, sc.wmin[w]);
    kmax = max(kmax, sc.wmax[w]);
  }
  uint32_t thr = 0u;  // keys > thr are taken (all candidates when they are at most k)
  int need = 0;       // and the first `need` keys equal to thr
  if (nscore + nforced > k && nforced >= k) {
    thr = 0xfffffffeu;  // the forced blocks fill the row: no score is taken
  } else if (nscore + nforced > k) {
    need = k - nforced;  // of the scores, in [kmin, kmax] (below every forced key)
    uint32_t lo = kmin, hi = kmax;
    for (int pass = 0;; ++pass) {
      const uint32_t span = hi - lo;
      if (span == 0u) {  // every key left is equal: the first `need` of them
        thr = lo;
        break;
      }
      const int bits = 32 - __clz(static_cast<int>(span));
      const int shift = bits > 8 ? bits - 8 : 0;  // (span >> shift) < 256
      int* h = sc.hist + (pass & 1) * kSelBins;
      if (pass > 0) {  // the other half was read in the previous pass, before its scan
        int* next = sc.hist + ((pass + 1) & 1) * kSelBins;
        for (int i = tid; i < kSelBins; i += blockDim.x) next[i] = 0;
      }
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if (key[i] != 0u && key[i] >= lo && key[i] <= hi) atomicAdd(&h[(key[i] - lo) >> shift], 1);
      __syncthreads();
      // Thread t owns bin 255 - t: "above" counts the keys of the higher bins.
      const int cnt = tid < kSelBins ? h[kSelBins - 1 - tid] : 0;
      int dummy;
      const int above = block_excl_scan(cnt, sc.scan, &dummy);
      if (tid < kSelBins && above < need && above + cnt >= need) {
        sc.found_bin = kSelBins - 1 - tid;
        sc.found_above = above;
        sc.found_cnt = cnt;
      }
      __syncthreads();
      need -= sc.found_above;
      const int fcnt = sc.found_cnt;
      const uint32_t nlo = lo + (static_cast<uint32_t>(sc.found_bin) << shift);
      const uint64_t nhi = uint64_t{nlo} + (uint64_t{1} << shift) - 1u;
      hi = nhi < hi ? static_cast<uint32_t>(nhi) : hi;
      lo = nlo;
      if (fcnt == need) {  // the whole bin is taken: every key >= lo (lo > 0x007fffff)
        thr = lo - 1u;
        need = 0;
        break;
      }
      if (shift == 0) {  // a one-key bin: thr itself, `need` of its copies
        thr = lo;
        break;
      }
    }
  }
  unsigned take = 0u;
  if (need > 0) {  // block-uniform
    int eq = 0;
#pragma unroll
    for (int i = 0; i < PER; ++i) eq += key[i] == thr ? 1 : 0;
    int dummy;
    int rank = block_excl_scan(eq, sc.scan, &dummy);
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      bool t = key[i] != 0u && key[i] > thr;
      if (key[i] == thr) t = rank++ < need;
      take |= (t ? 1u : 0u) << i;
    }
  } else {
#pragma unroll
    for (int i = 0; i < PER; ++i) take |= (key[i] != 0u && key[i] > thr ? 1u : 0u) << i;
  }
  return take;
}

// Writes the taken values in position order to dst[0..total), dst_key likewise when given;
// returns the count. Call with every thread.
template <int PER, class V, int T>
__device__ int compact_taken(unsigned take, const V (&val)[PER], V* dst, const uint32_t (*key)[PER], uint32_t* dst_key,
                             SelScratch<T>& sc) {
  int total = 0;
  int pos = block_excl_scan(__popc(take), sc.scan, &total);
#pragma unroll
  for (int i = 0; i < PER; ++i)
    if ((take >> i) & 1u) {
      dst[pos] = val[i];
      if (dst_key != nullptr) dst_key[pos] = (*key)[i];
      ++pos;
    }
  return total;
}

}  // namespace msa::MSA_GPU_NS
