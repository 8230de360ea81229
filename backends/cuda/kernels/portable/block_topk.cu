// block_topk: one thread block per (query block, selection head) row; never a host
// round trip. Forced blocks (sinks, local window) are taken first; the remaining
// r = k - forced slots go to the highest-scoring valid blocks, exactly and
// deterministically: scores become ordered uint32 keys (NaN as -inf, -0 as +0; -inf is
// never selected), and the r-th largest key is found by at most three rounds of a
// 2048-bin histogram over the shrinking key range [kmin, kmax]; equal keys at the
// threshold go to the lowest block indices (an ordered block scan). The chosen blocks
// are written in ascending order, padded with -1. Keys live in shared memory.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
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
};

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

  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const QBlock q = locate_qblock(cbt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  if (q.ntok <= 0) {
    for (int i = tid; i < p.k; i += kThreads) out[i] = -1;
    if (tid == 0) p.cnt[row] = 0;
    return;
  }
  const int Bs = p.bt.Bs;
  const int p1 = q.p0 + q.ntok - 1;
  const int nvalid = min(p1 / Bs + 1, p.n);
  if (nvalid <= p.k) {
    for (int i = tid; i < p.k; i += kThreads) out[i] = i < nvalid ? i : -1;
    if (tid == 0) p.cnt[row] = nvalid;
    return;
  }
  // Forced: [0, sink_end) and [loc_lo, loc_hi].
  const int sink_end = min(p.n_sink, nvalid);
  const bool has_local = p.n_local > 0;
  const int loc_lo = max(0, q.p0 / Bs - p.n_local + 1), loc_hi = min(p1 / Bs, nvalid - 1);
  auto forced = [&](int c) { return c < sink_end || (has_local && c >= loc_lo && c <= loc_hi); };
  const int nforced = sink_end + (has_local ? max(0, loc_hi - max(loc_lo, sink_end) + 1) : 0);
  const int r = max(0, p.k - nforced);

  // Candidate keys (0 = not a candidate).
  const float* srow = p.score + row * int64_t{p.n};
  int mycand = 0;
  uint32_t kmin = 0xffffffffu, kmax = 0u;
  for (int c = tid; c < nvalid; c += kThreads) {
    uint32_t key = 0;
    if (!forced(c)) {
      key = ordered_key(srow[c]);
      if (key <= 0x007fffffu) key = 0;  // -inf (and NaN): never selected
    }
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
  const size_t smem = static_cast<size_t>(std::max(p.n, 1)) * sizeof(uint32_t);
  // Sized for the largest row the kernel accepts, so the attribute is set once.
  allow_smem<topk_kernel>(static_cast<int>(kTopkMaxBlocks * sizeof(uint32_t)), st.props().index);
  topk_kernel<<<static_cast<unsigned>(a.NQ * Hs), kThreads, smem, st.native()>>>(p);
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
