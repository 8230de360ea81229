// block_topk: never a host round trip. Forced blocks (sinks, local window) are taken
// first; the remaining r = k - forced slots go to the highest-scoring valid blocks, exactly
// and deterministically: scores become ordered uint32 keys (NaN as -inf, -0 as +0; -inf is
// never selected); equal keys at the threshold go to the lowest block indices. The chosen
// blocks are written in ascending order, padded with -1.
//
// The row kernel (any row; the fallback): one thread block per (query block, selection
// head) row, keys in shared memory, the r-th largest key found by at most three rounds of a
// 2048-bin histogram over the shrinking key range, then an ordered block scan.
// The register kernels: few long rows (decode: B x Hs rows of up to 8K blocks at 1M): each row is cut into S
// chunks of <= 2048 blocks, one thread block per chunk keeps its chunk's k best (forced
// blocks carry the largest key, so they are always kept: at most k of them exist) with a
// radix select held in registers, writes them in block order to the stream's
// workspace and counts itself in on a per-row arrival counter; the chunk that arrives
// last selects the row's k best among the S x k candidates with the same select (the
// union of the chunks' k best holds the row's k best; candidate order is block order, so
// ties still go to the lower block) and resets the counter. One launch, no float atomics,
// identical results whatever the arrival order. Rows of <= 2048 blocks run that chunk
// code with S = 1 (one block per row, keys in registers, no merge) instead of the row
// kernel; more rows of over 2048 blocks than the split path takes (prefill chunks) run
// one block of 512 threads per row with up to 16 keys per thread (the wide path; rows of
// more than 8192 valid blocks go on to the row kernel). The
// register paths select with bins over the keys' current range and stop early
// (select_top), and load their scores before the batch scan.
// choose_block_topk (block_topk_choose.h) picks the path; topk_register = 0
// (MSA_TOPK_REGISTER) keeps every row on the row kernel.
#include <algorithm>

#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/block_topk_choose.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "backends/cuda/kernels/portable/topk_row.cuh"
#include "backends/cuda/kernels/portable/topk_select.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {
namespace {

constexpr int kThreads = 512, kBins = 2048, kBinsPerThread = kBins / kThreads;

struct TopkParams {
  Batch bt;
  const float* score = nullptr;  // [NQ][Hs][n]
  int32_t* idx = nullptr;        // [NQ][Hs][k]
  int32_t* cnt = nullptr;        // [NQ][Hs]
  int64_t NQ = 0;
  int Hs = 1, n = 0, Qb = 1, k = 1, n_sink = 0, n_local = 1;
  // Rows past the wide kernel's reach (more valid blocks than it holds), a flag per row:
  // set by the wide kernel; the row kernel after it takes only the flagged rows
  // (nullptr: the wide kernel holds every row, the row kernel takes all).
  uint8_t* deferred = nullptr;
};

// Fills `ri` and returns true when the row needs a selection. Otherwise (no query in the
// block: all -1; nvalid <= k: blocks 0..nvalid-1) the answer is fixed: written by this
// thread block when `write`, and false is returned. Call with every thread.
__device__ bool row_setup(const TopkParams& p, const QBlock& q, int64_t row, bool write, RowInfo& ri) {
  const int fixed = row_rule(q, p.bt.Bs, p.n, p.k, p.n_sink, p.n_local, ri);
  if (fixed < 0) return true;
  if (write) {
    int32_t* out = p.idx + row * p.k;
    for (int i = threadIdx.x; i < p.k; i += blockDim.x) out[i] = i < fixed ? i : -1;
    if (threadIdx.x == 0) p.cnt[row] = fixed;
  }
  return false;
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopkParams p) {
  extern __shared__ uint32_t keys[];
  __shared__ int hist[kBins];
  __shared__ int scratch[kThreads / kWarp + 1];
  __shared__ uint32_t red_min[kThreads / kWarp], red_max[kThreads / kWarp];
  __shared__ int found_bin, found_above;

  const int64_t row = blockIdx.x;
  const int64_t qb = row / p.Hs;
  const int tid = threadIdx.x;
  int32_t* out = p.idx + row * p.k;
  if (p.deferred != nullptr && p.deferred[row] == 0) return;  // the wide kernel answered it

  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const QBlock q = locate_qblock(cbt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  RowInfo ri;
  if (!row_setup(p, q, row, true, ri)) return;
  const int nvalid = ri.nvalid;
  auto forced = [&](int c) { return ri.forced(c); };
  const int nforced = ri.sink_end + (ri.has_local ? max(0, ri.loc_hi - max(ri.loc_lo, ri.sink_end) + 1) : 0);
  const int r = max(0, p.k - nforced);

  // Candidate keys (0 = not a candidate).
  const float* srow = p.score + row * int64_t{p.n};
  int mycand = 0;
  uint32_t kmin = 0xffffffffu, kmax = 0u;
  for (int c = tid; c < nvalid; c += kThreads) {
    const uint32_t key = forced(c) ? 0u : candidate_key(srow[c]);  // forced blocks are counted apart
    keys[c] = key;
    if (key != 0) {
      ++mycand;
      kmin = min(kmin, key);
      kmax = max(kmax, key);
    }
  }
  int ncand = 0;
  block_excl_scan(mycand, scratch, &ncand);
  {
    const int lane = tid % kWarp, warp = tid / kWarp;
#pragma unroll
    for (int o = kWarp / 2; o > 0; o >>= 1) {
      kmin = min(kmin, __shfl_xor_sync(MSA_FULL_MASK, kmin, o, kWarp));
      kmax = max(kmax, __shfl_xor_sync(MSA_FULL_MASK, kmax, o, kWarp));
    }
    if (lane == 0) {
      red_min[warp] = kmin;
      red_max[warp] = kmax;
    }
    __syncthreads();
    kmin = red_min[0];
    kmax = red_max[0];
    for (int w = 1; w < kThreads / kWarp; ++w) {
      kmin = min(kmin, red_min[w]);
      kmax = max(kmax, red_max[w]);
    }
  }

  // Threshold key K*: keys > K* are all taken, then `need` of the keys == K*.
  uint32_t kstar = 1;  // below every candidate: all candidates are taken
  int need = 0;
  if (r == 0) {
    kstar = 0xffffffffu;  // above every key (NaN maps to -inf): no candidate is taken
  } else if (ncand > r) {
    need = r;
    while (kmin < kmax) {
      const uint64_t range = uint64_t{kmax} - kmin + 1;
      for (int i = tid; i < kBins; i += kThreads) hist[i] = 0;
      __syncthreads();
      for (int c = tid; c < nvalid; c += kThreads) {
        const uint32_t key = keys[c];
        if (key >= kmin && key <= kmax && key != 0)
          atomicAdd(&hist[static_cast<int>((uint64_t{key - kmin} * kBins) / range)], 1);
      }
      __syncthreads();
      // Thread j owns bins [kBins - (j+1)*kBPT, kBins - j*kBPT): high bins first.
      const int top = kBins - tid * kBinsPerThread;
      int mine = 0;
#pragma unroll
      for (int i = 1; i <= kBinsPerThread; ++i) mine += hist[top - i];
      int dummy;
      int above = block_excl_scan(mine, scratch, &dummy);
      if (above < need && above + mine >= need) {
        for (int i = 1; i <= kBinsPerThread; ++i) {
          const int h = hist[top - i];
          if (above + h >= need) {
            found_bin = top - i;
            found_above = above;
            break;
          }
          above += h;
        }
      }
      __syncthreads();
      const uint64_t b = static_cast<uint64_t>(found_bin);
      const uint32_t lo = kmin + static_cast<uint32_t>((b * range + kBins - 1) / kBins);
      const uint32_t hi = kmin + static_cast<uint32_t>(((b + 1) * range + kBins - 1) / kBins) - 1;
      need -= found_above;
      kmin = lo;
      kmax = hi;
      __syncthreads();  // hist / found_* reused next round
    }
    kstar = kmin;
  }

  // Ordered pass over contiguous chunks: tie ranks, then output positions.
  const int per = (nvalid + kThreads - 1) / kThreads;
  const int c0 = min(nvalid, tid * per), c1 = min(nvalid, c0 + per);
  int eq = 0;
  for (int c = c0; c < c1; ++c) eq += keys[c] == kstar ? 1 : 0;
  int dummy;
  int rank = block_excl_scan(eq, scratch, &dummy);
  int nsel = 0;
  for (int c = c0; c < c1; ++c) {
    const uint32_t key = keys[c];
    bool take = forced(c) || key > kstar;
    if (key == kstar) take = rank++ < need;
    nsel += take ? 1 : 0;
  }
  int total = 0;
  int pos = block_excl_scan(nsel, scratch, &total);
  rank = block_excl_scan(eq, scratch, &dummy);  // recompute (scratch reused)
  for (int c = c0; c < c1; ++c) {
    const uint32_t key = keys[c];
    bool take = forced(c) || key > kstar;
    if (key == kstar) take = rank++ < need;
    if (take) {
      if (pos < p.k) out[pos] = c;
      ++pos;
    }
  }
  total = min(total, p.k);
  for (int i = total + tid; i < p.k; i += kThreads) out[i] = -1;
  if (tid == 0) p.cnt[row] = total;
}

// ---- few long rows: chunks of a row in parallel, merged by the last chunk ----------------
constexpr int kSplitThreads = kTopkSplitThreads;  // block_topk_choose.h
constexpr int kSplitMaxPer = kTopkSplitMaxPer;    // keys per thread: chunks and merges of <= 2048 keys
constexpr int kSplitMaxK = kTopkSplitMaxK;

constexpr int kTopkSlots = 8;  // streams with their own arrival counters
static_assert(kSplitMaxK * 2 <= kSplitThreads * kSplitMaxPer, "a merge of two chunks fits the registers");

// Per-row arrival counters: [slot][row]; zero at load, reset to zero by the merging chunk.
__device__ unsigned int g_topk_ctr[kTopkSlots * kTopkRowsPerSlot];

struct SplitArgs {
  int S = 1;                     // chunks per row
  int chunk = 1;                 // blocks per chunk
  uint32_t* cand_key = nullptr;  // [rows][S][k] (0: no candidate)
  int32_t* cand_idx = nullptr;   // [rows][S][k]
  int slot = 0;                  // this stream's counters: g_topk_ctr[slot][row]
};

// grid: rows x S (chunk fastest). PER: keys per thread of a chunk (chunk <= 256 PER).
// kOneBlock: S = 1, the chunk is the row (no merge code), a template argument so each
// kernel holds only the code it runs: the decode call runs once per layer from a cold
// instruction cache, where the code of an unused merge makes it stall on instruction
// fetch (ncu: 6968 SASS instructions in one kernel with a second select and the merge
// against 2200 for the one-block one).
template <int PER, bool kOneBlock>
__global__ void __launch_bounds__(kSplitThreads) topk_split_kernel(TopkParams p, SplitArgs sa) {
  __shared__ SelScratch<kSplitThreads> sc;
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  __shared__ int s_last;
  const int64_t row = blockIdx.x / sa.S;
  const int part = static_cast<int>(blockIdx.x % sa.S);
  const int64_t qb = row / p.Hs;
  const int tid = threadIdx.x;
  int32_t* out = p.idx + row * p.k;

  // The chunk's scores are loaded before the batch scan (the row holds p.n of them, the
  // entries past the valid blocks are read and dropped): both round trips overlap.
  const int c0 = part * sa.chunk;
  const float* srow = p.score + row * int64_t{p.n};
  float sv[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = c0 + tid * PER + i;
    sv[i] = c < p.n && c < c0 + sa.chunk ? srow[c] : 0.0f;
  }
  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const QBlock q = locate_qblock(cbt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  // Rows without a selection to make are written by chunk 0 alone (no counting).
  RowInfo ri;
  if (!row_setup(p, q, row, part == 0, ri)) return;

  // This chunk's keys: forced blocks get the largest key (no score maps to it).
  const int c1 = min(ri.nvalid, c0 + sa.chunk);
  uint32_t key[PER];
  int32_t blk[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = c0 + tid * PER + i;
    key[i] = c < c1 ? select_key(ri, c, sv[i]) : 0u;
    blk[i] = c;
  }
  if constexpr (kOneBlock) {  // the whole row in one block: its k best are the answer
    const unsigned take = select_top<PER>(key, p.k, sc);
    const int total = compact_taken<PER, int32_t>(take, blk, out, nullptr, nullptr, sc);
    for (int i = total + tid; i < p.k; i += blockDim.x) out[i] = -1;
    if (tid == 0) p.cnt[row] = total;
    return;
  }
  const int64_t cbase = (row * sa.S + part) * int64_t{p.k};
  {
    const unsigned take = select_top<PER>(key, p.k, sc);
    const int n = compact_taken<PER, int32_t>(take, blk, sa.cand_idx + cbase, &key, sa.cand_key + cbase, sc);
    for (int i = n + tid; i < p.k; i += blockDim.x) {
      sa.cand_key[cbase + i] = 0u;
      sa.cand_idx[cbase + i] = -1;
    }
  }

  // Arrival: the last chunk of the row merges (the others' candidates are visible to it).
  __threadfence();
  __syncthreads();
  unsigned int* ctr = g_topk_ctr + int64_t{sa.slot} * kTopkRowsPerSlot + row;
  if (tid == 0) s_last = atomicAdd(ctr, 1u) == static_cast<unsigned>(sa.S - 1) ? 1 : 0;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  const int M = sa.S * p.k;  // <= kSplitThreads * kSplitMaxPer
  const volatile uint32_t* ck = sa.cand_key + row * int64_t{M};
  const volatile int32_t* ci = sa.cand_idx + row * int64_t{M};
  uint32_t mk[kSplitMaxPer];
  int32_t mi[kSplitMaxPer];
#pragma unroll
  for (int i = 0; i < kSplitMaxPer; ++i) {
    const int j = tid * kSplitMaxPer + i;
    mk[i] = j < M ? ck[j] : 0u;
    mi[i] = j < M ? ci[j] : -1;
  }
  const unsigned take = select_top<kSplitMaxPer>(mk, p.k, sc);
  const int total = compact_taken<kSplitMaxPer, int32_t>(take, mi, out, nullptr, nullptr, sc);
  for (int i = total + tid; i < p.k; i += blockDim.x) out[i] = -1;
  if (tid == 0) {
    p.cnt[row] = total;
    *ctr = 0u;  // every chunk of the row has counted: ready for the next launch
  }
}

// One thread block per row with the keys in registers (no chunks, no merge): few rows of
// at most kSplitThreads * kSplitMaxPer blocks (decode up to 256K context), where the
// row kernel (keys in shared memory, 2048-bin histogram rounds) is latency-bound.
void launch_one_block(Stream& st, const TopkParams& p, int64_t rows) {
  SplitArgs sa;
  sa.S = 1;
  sa.chunk = p.n;
  const unsigned grid = static_cast<unsigned>(rows);
  if (p.n <= kSplitThreads)
    topk_split_kernel<1, true><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  else if (p.n <= kSplitThreads * 2)
    topk_split_kernel<2, true><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  else if (p.n <= kSplitThreads * 4)
    topk_split_kernel<4, true><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  else
    topk_split_kernel<kSplitMaxPer, true><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  MSA_CUDA_CHECK_LAUNCH();
}

// The split path for few long rows: plan.S chunks of plan.chunk blocks per row.
void launch_split(Stream& st, const TopkParams& p, int64_t rows, const TopkPlan& plan) {
  SplitArgs sa;
  sa.S = plan.S;
  sa.chunk = plan.chunk;
  sa.slot = stream_slot(st, kTopkSlots);
  const int64_t M = rows * sa.S * int64_t{p.k};
  char* ws = static_cast<char*>(st.workspace(static_cast<size_t>(M) * 8 + 256));
  sa.cand_key = reinterpret_cast<uint32_t*>(ws);
  sa.cand_idx = reinterpret_cast<int32_t*>(ws + M * 4);
  const unsigned grid = static_cast<unsigned>(rows * sa.S);
  if (sa.chunk <= kSplitThreads * 2)
    topk_split_kernel<2, false><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  else if (sa.chunk <= kSplitThreads * 4)
    topk_split_kernel<4, false><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  else
    topk_split_kernel<kSplitMaxPer, false><<<grid, kSplitThreads, 0, st.native()>>>(p, sa);
  MSA_CUDA_CHECK_LAUNCH();
}

// ---- many rows of > 2048 blocks (prefill chunks): one wide block per row ----------------
constexpr int kWideThreads = kTopkWideThreads;  // block_topk_choose.h

// Thread t holds blocks t * PER .. t * PER + PER - 1 in registers (the select's layout),
// read as float4 when the rows are 16-byte aligned (n % 4 == 0), so no shared-memory copy
// of the row and no bank-conflicted ordered pass: the row kernel's histogram rounds over
// 2048 bins and its three ordered scans are what make it slow on 8192-block rows.
template <int PER>
__global__ void __launch_bounds__(kWideThreads) topk_wide_kernel(TopkParams p) {
  __shared__ SelScratch<kWideThreads> sc;
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const int64_t row = blockIdx.x;
  const int64_t qb = row / p.Hs;
  const int tid = threadIdx.x;
  const int c0 = tid * PER;
  const float* srow = p.score + row * int64_t{p.n};
  float sv[PER];
  if (PER % 4 == 0 && p.n % 4 == 0) {
#pragma unroll
    for (int i = 0; i < PER; i += 4) {
      const float4 v = c0 + i < p.n ? *reinterpret_cast<const float4*>(srow + c0 + i) : float4{0.f, 0.f, 0.f, 0.f};
      sv[i] = v.x;
      sv[i + 1] = v.y;
      sv[i + 2] = v.z;
      sv[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < PER; ++i) sv[i] = c0 + i < p.n ? srow[c0 + i] : 0.0f;
  }
  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const QBlock q = locate_qblock(cbt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  RowInfo ri;
  // Rows of more valid blocks than the block holds are left to the row kernel.
  const bool select = row_setup(p, q, row, true, ri);
  const bool defer = select && ri.nvalid > kWideThreads * PER;
  if (p.deferred != nullptr && tid == 0) p.deferred[row] = defer ? 1 : 0;
  if (!select || defer) return;
  uint32_t key[PER];
  int32_t blk[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = c0 + i;
    key[i] = c < ri.nvalid ? select_key(ri, c, sv[i]) : 0u;
    blk[i] = c;
  }
  int32_t* out = p.idx + row * p.k;
  const unsigned take = select_top<PER>(key, p.k, sc);
  const int total = compact_taken<PER, int32_t>(take, blk, out, nullptr, nullptr, sc);
  for (int i = total + tid; i < p.k; i += kWideThreads) out[i] = -1;
  if (tid == 0) p.cnt[row] = total;
}

// Rows of more than 2048 blocks (block_topk_choose.h): 8 or 16 keys per thread. Past 8192
// blocks (a page table wider than the contexts, a longer context) the wide kernel flags
// the rows of more than 8192 valid blocks in the workspace and the row kernel follows for
// them (its other blocks read their flag and return).
void launch_rows(Stream& st, const TopkParams& p, int64_t rows);
void launch_wide(Stream& st, const TopkParams& p, int64_t rows) {
  const unsigned grid = static_cast<unsigned>(rows);
  TopkParams w = p;
  if (p.n > kTopkWideMaxKeys) w.deferred = static_cast<uint8_t*>(st.workspace(static_cast<size_t>(rows)));
  if (p.n <= kWideThreads * 8)
    topk_wide_kernel<8><<<grid, kWideThreads, 0, st.native()>>>(w);
  else
    topk_wide_kernel<kTopkWideMaxPer><<<grid, kWideThreads, 0, st.native()>>>(w);
  MSA_CUDA_CHECK_LAUNCH();
  if (w.deferred != nullptr) launch_rows(st, w, rows);
}

// Many rows (or the ones the register paths do not take): a block per row.
void launch_rows(Stream& st, const TopkParams& p, int64_t rows) {
  const size_t smem = static_cast<size_t>(std::max(p.n, 1)) * sizeof(uint32_t);
  // Sized for the largest row the kernel accepts, so the attribute is set once.
  allow_smem<topk_kernel>(static_cast<int>(kTopkMaxBlocks * sizeof(uint32_t)), st.props().index);
  topk_kernel<<<static_cast<unsigned>(rows), kThreads, smem, st.native()>>>(p);
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void block_topk(hal::Stream& s, const ops::BlockTopkArgs& a) {
  const int64_t Hs = a.block_score.dim(1);
  if (a.NQ == 0 || Hs == 0) return;
  auto& st = gpu_stream(s);
  TopkParams p;
  p.bt.cu_q = a.cu_q.data<int32_t>();
  p.bt.kv_len = a.kv_len.data<int32_t>();
  p.bt.B = static_cast<int>(a.kv_len.dim(0));
  p.bt.max_blocks = static_cast<int>(a.block_score.dim(2));
  p.bt.Bs = a.Bs;
  p.bt.flag = st.error_flag();
  p.bt.op = static_cast<int>(hal::OpId::block_topk);
  // T is not an argument of block_topk: cu_q[B] is trusted to be the packed length.
  p.bt.T = -1;
  p.score = a.block_score.data<float>();
  p.idx = a.block_idx.data<int32_t>();
  p.cnt = a.block_cnt.data<int32_t>();
  p.NQ = a.NQ;
  p.Hs = static_cast<int>(Hs);
  p.n = p.bt.max_blocks;
  p.Qb = a.Qb;
  p.k = a.k;
  p.n_sink = a.n_sink;
  p.n_local = a.n_local;
  const int64_t rows = a.NQ * Hs;
  const TopkPlan plan =
      choose_block_topk(rows, p.n, p.k, st.props().sm_count, st.tuning(), stream_slot(st, kTopkSlots) >= 0);
  switch (plan.kernel) {
    case TopkKernel::one_block:
      launch_one_block(st, p, rows);
      return;
    case TopkKernel::split:
      launch_split(st, p, rows, plan);
      return;
    case TopkKernel::wide:
      launch_wide(st, p, rows);
      return;
    case TopkKernel::rows:
      launch_rows(st, p, rows);
      return;
  }
}

}  // namespace msa::MSA_GPU_NS
