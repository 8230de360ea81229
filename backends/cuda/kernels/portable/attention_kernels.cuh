// The thread-block kernels of sparse_block_attention, dense_attention and
// patch_attention_3d, templated over the attention core (FmaCore here; the CUDA backend's
// attention/wmma.cu instantiates them with a tensor-core core). Each kernel fills the shared row table of
// its (up to kRows) query rows and hands the core a tile source.
#pragma once
#include "backends/cuda/error_flags.h"
#include "backends/cuda/kernels/portable/attention_core.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {

// ---- sparse_block_attention ------------------------------------------------------------
struct SparseParams {
  Batch bt;
  const void* q = nullptr;
  const char* kc = nullptr;
  const char* vc = nullptr;
  const int32_t* bidx = nullptr;  // [NQ][Hs][k]
  int Qb = 1;
  int64_t NQ = 0;
  int Hq = 1, Hkv = 1, G = 1, D = 0, k = 1, Hs = 1;
  int tpc = 1, nrc = 1, S = 1, es = 2;  // tokens per row chunk, row chunks, splits, elem size
  float scale = 1.0f;
  AttnOut o;
};

constexpr int kSelCache = 64;  // selected blocks per split whose pages are preloaded

struct SparseSrc {
  const SparseParams* p;
  const int32_t* entries;
  int b, g, kv, e0, tpb;
  const int* sel_c;     // shared: block of entry e0 + j (or -1), j < kSelCache
  const int* sel_page;  // shared: its page (or -1)
  __device__ bool tile(int i, Tile& t) const {
    const int Bs = p->bt.Bs;
    const int j = i / tpb, part = i % tpb;
    int c;
    int64_t page;
    if (j < kSelCache) {  // preloaded (and validated) in parallel at kernel start
      c = sel_c[j];
      page = sel_page[j];
      if (c < 0 || page < 0) return false;
    } else {
      c = entries[e0 + j];
      if (c < 0 || c >= (kv + Bs - 1) / Bs) return false;  // contributes nothing (not an error)
      page = page_of(p->bt, b, c);
      if (page < 0) return false;
    }
    t.kpos0 = c * Bs + part * kBK;
    t.nkeys = min(kBK, min(Bs - part * kBK, kv - t.kpos0));
    const int64_t off = ((page * p->Hkv + g) * Bs + part * kBK) * int64_t{p->D} * p->es;
    t.k = p->kc + off;
    t.v = p->vc + off;
    t.stride = p->D;
    return true;
  }
};

// grid: NQ x Hkv x row chunks x splits.
template <int DT, int DP, class Core>
__global__ void __launch_bounds__(kAttnThreads) sparse_kernel(SparseParams p) {
  using L = typename Core::template Layout<DT, DP>;
  extern __shared__ __align__(128) char smem[];
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.S);
  x /= p.S;
  const int rc = static_cast<int>(x % p.nrc);
  x /= p.nrc;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t qb = x / p.Hkv;
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  __shared__ int sel_c[kSelCache], sel_page[kSelCache];
  // The selected entries depend only on the grid position: issue their load before the
  // batch scan so it overlaps (one dependent global round trip less on the decode path).
  const int eps = (p.k + p.S - 1) / p.S, e0 = split * eps;
  const int ne = max(0, min(p.k, e0 + eps) - e0);
  const int32_t* entries = p.bidx + (qb * p.Hs + (p.Hs == 1 ? 0 : g)) * int64_t{p.k};
  const int pre_c = threadIdx.x < min(ne, kSelCache) ? entries[e0 + threadIdx.x] : -1;
  const Batch bt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const QBlock q = locate_qblock(bt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  if (q.ntok <= rc * p.tpc) return;  // no rows here (uniform)
  int64_t* row_id = attn_row_id<L>(smem);
  int* row_lim = attn_row_lim<L>(smem);
  if (threadIdx.x < kRows) {
    const int r = threadIdx.x, ti = rc * p.tpc + r / p.G;
    const bool ok = r < p.tpc * p.G && ti < q.ntok;
    row_id[r] = ok ? int64_t{q.t0 + ti} * p.Hq + g * p.G + r % p.G : -1;
    row_lim[r] = ok ? min(q.kv - 1, q.p0 + ti) : -1;
  }
  __syncthreads();
  if (threadIdx.x < min(ne, kSelCache)) {
    const int j = threadIdx.x, c = pre_c;
    const bool ok = c >= 0 && c < (q.kv + p.bt.Bs - 1) / p.bt.Bs;
    sel_c[j] = ok ? c : -1;
    sel_page[j] = ok ? static_cast<int>(page_of(p.bt, q.b, c)) : -1;
  }
  __syncthreads();
  SparseSrc src{&p, entries, q.b, g, q.kv, e0, (p.bt.Bs + kBK - 1) / kBK, sel_c, sel_page};
  AttnOut o = p.o;
  o.split = split;
  Core::template run<DT, DP>(smem, p.q, p.D, p.scale, src, ne * src.tpb, o);
}

// ---- dense_attention ---------------------------------------------------------------------
struct DenseParams {
  Batch bt;
  const void* q = nullptr;
  const char* kc = nullptr;
  const char* vc = nullptr;
  int Hq = 1, Hkv = 1, G = 1, D = 0, es = 2;
  int tpc = 1, S = 1, bps = 1;  // tokens per chunk, splits, KV blocks per split
  float scale = 1.0f;
  AttnOut o;
};

struct DenseSrc {
  const DenseParams* p;
  int b, g, kv, c0, tpb;
  __device__ bool tile(int i, Tile& t) const {
    const int Bs = p->bt.Bs;
    const int c = c0 + i / tpb, part = i % tpb;
    const int64_t page = page_of(p->bt, b, c);
    if (page < 0) return false;
    t.kpos0 = c * Bs + part * kBK;
    t.nkeys = min(kBK, min(Bs - part * kBK, kv - t.kpos0));
    const int64_t off = ((page * p->Hkv + g) * Bs + part * kBK) * int64_t{p->D} * p->es;
    t.k = p->kc + off;
    t.v = p->vc + off;
    t.stride = p->D;
    return true;
  }
};

// Token-chunk slot `slot` of a dense call: chunks of up to tpc tokens, sequence by
// sequence (a sequence without queries has none); b = -1 past the last chunk.
struct ChunkLoc {
  int b = -1;
  int chunk = 0;
  Seq s;
};
__device__ __forceinline__ ChunkLoc locate_chunk(const Batch& bt, int64_t slot, int tpc) {
  ChunkLoc r;
  int64_t acc = 0;
  for (int i = 0; i < bt.B; ++i) {
    const Seq s = load_seq(bt, i, false);
    const int n = s.ok ? (s.qlen + tpc - 1) / tpc : 0;
    if (slot < acc + n) {
      r.b = i;
      r.chunk = static_cast<int>(slot - acc);
      r.s = s;
      return r;
    }
    acc += n;
  }
  return r;
}

// grid: chunk slots (ceil(T / tpc) + B) x Hkv x splits; a chunk is up to tpc tokens of
// one sequence.
template <int DT, int DP, class Core>
__global__ void __launch_bounds__(kAttnThreads) dense_kernel(DenseParams p) {
  using L = typename Core::template Layout<DT, DP>;
  extern __shared__ __align__(128) char smem[];
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.S);
  x /= p.S;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t slot = x / p.Hkv;
  if (blockIdx.x == 0)
    for (int b = threadIdx.x; b < p.bt.B; b += blockDim.x) load_seq(p.bt, b);
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const Batch bt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const ChunkLoc loc = locate_chunk(bt, slot, p.tpc);
  const int b = loc.b, chunk = loc.chunk;
  const Seq sq = loc.s;
  if (b < 0) return;
  int64_t* row_id = attn_row_id<L>(smem);
  int* row_lim = attn_row_lim<L>(smem);
  if (threadIdx.x < kRows) {
    const int r = threadIdx.x, ti = chunk * p.tpc + r / p.G;
    const bool ok = r < p.tpc * p.G && ti < sq.qlen;
    row_id[r] = ok ? int64_t{sq.q0 + ti} * p.Hq + g * p.G + r % p.G : -1;
    row_lim[r] = ok ? sq.kv - sq.qlen + ti : -1;  // its position (<= kv - 1)
  }
  __syncthreads();
  int max_lim = -1;
  for (int r = 0; r < kRows; ++r) max_lim = max(max_lim, row_lim[r]);
  const int nblk = max_lim / p.bt.Bs + 1;
  const int c0 = split * p.bps, c1 = min(nblk, c0 + p.bps);
  DenseSrc src{&p, b, g, sq.kv, c0, (p.bt.Bs + kBK - 1) / kBK};
  AttnOut o = p.o;
  o.split = split;
  Core::template run<DT, DP>(smem, p.q, p.D, p.scale, src, max(0, c1 - c0) * src.tpb, o);
}

// ---- patch_attention_3d ------------------------------------------------------------------
// One block walks `items` (validating: grid dims >= 1, patches summing to N) and writes
// the chunk table {first token, tokens, window start, window end}; chunks hold up to
// rows_per_chunk tokens of one window (kRows for the kernels here).
__global__ void patch_chunks_kernel(const int32_t* __restrict__ items, int n_items, int64_t N, int window,
                                    int4* __restrict__ chunks, int64_t max_chunks, int* count, int* flag,
                                    int rows_per_chunk);

struct PatchParams {
  const void* q = nullptr;
  const char* k = nullptr;
  const char* v = nullptr;
  const int4* chunks = nullptr;
  const int* count = nullptr;
  int H = 1, D = 0, es = 2;
  float scale = 1.0f;
  AttnOut o;
  int64_t N = 0;    // patches (host: the launch grid)
  int n_items = 0;  // visual items (host: the launch grid)
};

struct PatchSrc {
  const PatchParams* p;
  int h, ws, we;
  __device__ bool tile(int i, Tile& t) const {
    t.kpos0 = ws + i * kBK;
    t.nkeys = min(kBK, we - t.kpos0);
    const int64_t off = (int64_t{t.kpos0} * p->H + h) * p->D * p->es;
    t.k = p->k + off;
    t.v = p->v + off;
    t.stride = int64_t{p->H} * p->D;
    return true;
  }
};

// Persistent: loops over (chunk, head) work items.
template <int DT, int DP, class Core>
__global__ void __launch_bounds__(kAttnThreads) patch_kernel(PatchParams p) {
  using L = typename Core::template Layout<DT, DP>;
  extern __shared__ __align__(128) char smem[];
  const int64_t work = int64_t{*p.count} * p.H;
  int64_t* row_id = attn_row_id<L>(smem);
  int* row_lim = attn_row_lim<L>(smem);
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int4 ch = p.chunks[w / p.H];
    const int h = static_cast<int>(w % p.H);
    __syncthreads();  // the previous item is done with the row table
    if (threadIdx.x < kRows) {
      const int r = threadIdx.x;
      const bool ok = r < ch.y;
      row_id[r] = ok ? int64_t{ch.x + r} * p.H + h : -1;
      row_lim[r] = ok ? INT32_MAX : -1;  // bidirectional inside the window
    }
    __syncthreads();
    PatchSrc src{&p, h, ch.z, ch.w};
    Core::template run<DT, DP>(smem, p.q, p.D, p.scale, src, (ch.w - ch.z + kBK - 1) / kBK, p.o);
  }
}

}  // namespace msa::MSA_GPU_NS
