// How the tensor-core training kernels (the attention backward's dq and dk/dv kernels,
// indexer_kl's rows and dki kernels) walk their work:
//  - query-outer: KeyWalk, the key tiles of the blocks a token attends, in selection order;
//  - KV-block-outer: items of a fixed token count cut from an inverse index bucket's sorted
//    entries (item_span, stage_entries), claimed in ticket order by persistent blocks,
//    their rows gathered tile by tile (pipeline_tiles), each item adding its partial sums
//    to its predecessors' once they are in (wait_for_items, release_item: a
//    release/acquire flag per output chunk), so every sum has an order fixed by the index,
//    not by scheduling. An item's predecessor holds a smaller ticket, so it runs (or ran)
//    on a resident block: the wait cannot deadlock.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma.cuh"

namespace msa::cuda::bwd {

// The key tiles (block c, page, first key k0; the block's slots for `walk`) of the blocks
// token `walk` attends with selection row `row`, kKeys keys at a time. Lane l holds entry
// jb + l of the current 32-entry window; `pend` the window's valid lanes not walked yet.
// Every warp walking the same inputs gets the same tiles. Warp-uniform.
template <int kKeys>
struct KeyWalk {
  int nsel = 0;
  int jb = -32, lc = 0;
  int64_t lpage = -1;
  unsigned pend = 0;
  bool have = false;
  int c = 0, slots = 0, k0 = 0;  // the current tile
  int64_t page = 0;

  __device__ __forceinline__ explicit KeyWalk(int entries) : nsel(entries) {}

  __device__ __forceinline__ bool next(const AttendSets& a, const TokenAt& walk, int row, int lane) {
    if (have) {
      k0 += kKeys;
      if (k0 < slots) return true;
    }
    for (;;) {
      if (pend == 0) {
        jb += 32;
        if (jb >= nsel) return have = false;
        int cc = 0;
        int64_t pg = -1;
        const bool ok = jb + lane < nsel && attended_at(a, walk, row, jb + lane, cc, pg);
        lc = cc;
        lpage = pg;
        pend = __ballot_sync(0xffffffffu, ok);
        continue;
      }
      const int src = __ffs(pend) - 1;
      pend &= pend - 1;
      c = __shfl_sync(0xffffffffu, lc, src);
      page = __shfl_sync(0xffffffffu, lpage, src);
      slots = attended_slots(a.bt.Bs, walk.pos, c);  // >= 1: the block starts at or before walk.pos
      k0 = 0;
      return have = true;
    }
  }
};

// The next item ticket of a persistent block (call with warp 0; every lane gets it).
__device__ __forceinline__ int claim_ticket(int* ticket, int lane) {
  int t = 0;
  if (lane == 0) t = atomicAdd(ticket, 1);
  return __shfl_sync(0xffffffffu, t, 0);
}

// Item mi of inverse index bucket `bucket`: its tokens [U0, U1) of the sorted entries'
// token prefix (tpi per item) and its entries [wa, wa + nw). Call with the whole warp.
struct ItemSpan {
  int U0, U1, wa, nw;
};
__device__ __forceinline__ ItemSpan item_span(const InverseIndex& inv, const int* tokpre, int64_t bucket, int mi,
                                              int tpi, int lane) {
  const int w0 = inv.begin[bucket], w1 = inv.begin[bucket + 1];
  const int t0 = __ldcg(tokpre + w0), ntok = __ldcg(tokpre + w1) - t0;
  ItemSpan r;
  r.U0 = t0 + min(ntok, mi * tpi);
  r.U1 = t0 + min(ntok, (mi + 1) * tpi);
  r.wa = r.U1 > r.U0 ? warp_last_le(tokpre, w0, w1, r.U0, lane) : w0;
  // Every entry holds a token: tokens [U0, U1) lie in entries wa .. wa + (U1 - U0) - 1.
  r.nw = min(w1 - r.wa, r.U1 - r.U0);
  return r;
}

// An item's entries in shared memory as int4 {t0, p0, c, first token (prefix)}, entry nw
// the end sentinel {0, 0, 0, its end}. Call with the whole block (kThreads threads).
template <int kThreads>
__device__ __forceinline__ void stage_entries(int4* s_ent, const InverseIndex& inv, const int* tokpre, int wa, int nw) {
  for (int i = threadIdx.x; i <= nw; i += kThreads) {
    int4 r = make_int4(0, 0, 0, __ldcg(tokpre + wa + i));
    if (i < nw) {
      const Entry en = inv.at(wa + i);
      r.x = en.t0;
      r.y = en.p0;
      r.z = en.c;
    }
    s_ent[i] = r;
  }
}

// The kStages-deep cp.async pipeline over an item's tiles of 16 rows: tiles 0 ..
// kStages - 2 are issued up front; per tile t, once it has landed for every thread (stage
// (t - 1) % kStages is then free), tile t + kStages - 1 is issued and body(t) runs; then
// every copy is waited for. issue(t) commits one cp.async group per call (an empty one
// past the last tile). Call with the whole block.
template <typename Issue, typename Body>
__device__ __forceinline__ void pipeline_tiles(int ntiles, const Issue& issue, const Body& body) {
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) issue(t);
  for (int t = 0; t < ntiles; ++t) {
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();
    issue(t + kStages - 1);
    body(t);
  }
  ptx::cp_async_wait<0>();
}

// Before item m of a chain adds to the running sums: waits until items 0 .. m - 1 are in.
// Call with the whole block.
__device__ __forceinline__ void wait_for_items(const int* sem, int m) {
  if (m == 0) return;
  if (threadIdx.x == 0) {
    while (ptx::ld_acquire_gpu(sem) < m) __nanosleep(256);
    __threadfence();
  }
  __syncthreads();
}
// After item m's stores: releases items m + 1 ... Call with the whole block.
__device__ __forceinline__ void release_item(int* sem, int m) {
  __syncthreads();  // every thread's stores are issued
  if (threadIdx.x == 0) {
    __threadfence();
    ptx::st_release_gpu(sem, m + 1);
  }
}

}  // namespace msa::cuda::bwd
