// The gradients of paged attention (sparse_block_attention_backward,
// dense_attention_backward) in f32, deterministic run to run:
//  - tile_delta_kernel: delta = dot(dout, out) per query row;
//  - paged_dq_kernel: one CTA per (tile of query rows, KV head) walks the rows' attended
//    blocks in key tiles, recomputing P and dS, dq in registers;
//  - paged_dkdv_kernel: one CTA per (page, KV head, kSlotChunk key slots) loops over the
//    entries that attended the slab, from the inverse index (training_index.cuh), in
//    tiles of query rows; dk / dv in registers. Slots no query attended stay 0; keys past
//    a sequence's kv_len (slack slots) are never read into a sum.
// Both are FlashAttention-2 backward tiles (backward_tiles.cuh): every gradient element
// has one owning thread that sums in a fixed order (no atomics). CUDA's native tier runs
// bf16/f16 calls on tensor-core kernels instead where its chooser picks them
// (kernels/attention_backward/).
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/portable/backward_tiles.cuh"
#include "backends/cuda/kernels/portable/dq_tiling.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/training_index.cuh"
#include "backends/cuda/kernels/portable/training_rows.cuh"
#include "hal/op_id.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

struct PagedGrad {
  AttendSets sets;
  const void* q = nullptr;
  const void* dout = nullptr;
  const void* kc = nullptr;
  const void* vc = nullptr;
  const float* lse = nullptr;
  const float* delta = nullptr;
  int Hq = 1, Hkv = 1, G = 1, D = 0;
  float scale = 1.0f;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  InverseIndex inv;
  int Hb = 1;      // buckets per page: Hkv (sparse per_kv_head) or 1 (one bucket per page)
  int chunks = 1;  // CTAs per slab: ceil(Bs / kSlotChunk)
  // Row splits of the dk/dv kernel: splits > 1 writes split s's partial sums to
  // part_dk / part_dv + s * plane (plane = P * Hkv * Bs * D), summed in split order after.
  int splits = 1;
  int64_t plane = 0;
  float* part_dk = nullptr;
  float* part_dv = nullptr;
};

// CTAs per slab chunk of the dk/dv kernel: enough for about kDkdvTargetCtas CTAs in all,
// from the shape alone (so the summation order is the same on every device).
inline constexpr int64_t kDkdvTargetCtas = 1024;
inline constexpr int kMaxDkdvSplits = 8;
inline int dkdv_splits(int64_t slab_ctas) {
  if (slab_ctas <= 0) return 1;
  return static_cast<int>(std::clamp<int64_t>(kDkdvTargetCtas / slab_ctas, 1, kMaxDkdvSplits));
}

// dk[i] = sum over s of part_dk[s * plane + i] in split order (and dv).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) dkdv_merge_kernel(PagedGrad p) {
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i < p.plane; i += int64_t{gridDim.x} * kThreads) {
    float k = 0.0f, v = 0.0f;
    for (int sp = 0; sp < p.splits; ++sp) {
      k += p.part_dk[sp * p.plane + i];
      v += p.part_dv[sp * p.plane + i];
    }
    p.dk[i] = k;
    p.dv[i] = v;
  }
}

// A run of a dq tile: its tokens [ta, end), end <= t_end, of one sequence and query block
// (the same attended blocks; `last` attends the most slots of each).
struct TokenRun {
  TokenAt first, last;
  int64_t end = 0;
};
__device__ __forceinline__ TokenRun token_run(const AttendSets& a, int64_t ta, int64_t t_end) {
  TokenRun run;
  run.first = run.last = find_token(a, static_cast<int>(ta));
  run.end = ta + 1;
  while (run.end < t_end) {
    const TokenAt n = find_token(a, static_cast<int>(run.end));
    if (n.b != run.first.b || n.qb != run.first.qb) break;
    run.last = n;
    ++run.end;
  }
  return run;
}

// grid: ceil(T / tile_tokens) x Hkv x head_chunks. The tile's tokens are taken in runs of
// one sequence and query block (the same selected blocks); a run stages its rows once and
// walks the blocks the run's last token attends, kTileKeys slots at a time, each row
// limited to its own causal slots. Per 32 keys x BQ rows x D: 3 * 32 * BQ * D FMAs from
// shared memory for 2 * 32 * D staged K/V elements (a per-slot kernel would re-read q and
// dout per slot and reduce every dot product across a wave).
template <int DT, int DP>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) paged_dq_kernel(PagedGrad p, DqTiling tl, int64_t T) {
  extern __shared__ __align__(16) char tiles_mem[];
  BwdTiles<DP>& s = *reinterpret_cast<BwdTiles<DP>*>(tiles_mem);
  constexpr int BQ = BwdTiles<DP>::BQ;
  int64_t x = blockIdx.x;
  const int hc = static_cast<int>(x % tl.head_chunks);
  x /= tl.head_chunks;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t t_first = x / p.Hkv * tl.tile_tokens;
  const int64_t t_end = min(T, t_first + tl.tile_tokens);
  const int h0 = g * p.G + hc * tl.tile_heads, nh = min(tl.tile_heads, p.G - hc * tl.tile_heads);
  const int Bs = p.sets.bt.Bs, D = p.D;
  const int sel_row = p.sets.Hs == 1 ? 0 : g;
  for (int64_t ta = t_first; ta < t_end;) {
    const TokenRun run = token_run(p.sets, ta, t_end);
    const TokenAt &first = run.first, &last = run.last;
    const int64_t tb = run.end;
    const int nrows = static_cast<int>(tb - ta) * nh;
    const auto row_of = [&](int r) { return r < nrows ? (ta + r / nh) * p.Hq + h0 + r % nh : int64_t{-1}; };
    __syncthreads();  // the previous run is done with the tiles
    stage_queries<DT, DP>(s, p.q, p.dout, p.lse, p.delta, D, row_of);
    QueryGrads<DP> acc;
    for_each_attended(p.sets, last, sel_row, [&](int c, int64_t page, int slots) {
      const int64_t slab = (page * p.Hkv + g) * Bs * int64_t{D};
      for (int k0 = 0; k0 < slots; k0 += kTileKeys) {
        const int nk = min(kTileKeys, slots - k0);
        __syncthreads();  // queries staged; the previous key tile is consumed
        stage_keys<DT, DP>(s, p.kc, p.vc, D, [&](int r) { return r < nk ? slab + int64_t{k0 + r} * D : int64_t{-1}; });
        for (int r = threadIdx.x; r < BQ; r += kTileThreads)
          s.lim[r] = r < nrows ? attended_slots(Bs, first.pos + r / nh, c) - k0 : 0;
        __syncthreads();
        score_tile<DP, false, true>(s, nk, p.scale);
        __syncthreads();
        acc.add(s);
      }
    });
    acc.store(p.dq, D, row_of);
    ta = tb;
  }
}

// grid: P x Hkv x chunks x splits. One CTA owns kTileKeys slots of a slab (K/V staged
// once) and loops over its share (1 / splits, in order) of the query-row tiles of the
// entries that attended the slab, from the inverse index (training_index.cuh): BQ rows
// per tile (token-major, the G heads of each token), each row limited to its causal
// slots; dk / dv in registers. A slab's rows are serial work, so the splits give a
// call of few pages enough CTAs (a page x KV head x 32-slot chunk alone is ~256 CTAs
// for T = 4096, Bs = 64, Hkv = 2).
template <int DT, int DP>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) paged_dkdv_kernel(PagedGrad p) {
  static_assert(kSlotChunk == kTileKeys, "a slab chunk is one key tile");
  extern __shared__ __align__(16) char tiles_mem[];
  BwdTiles<DP>& s = *reinterpret_cast<BwdTiles<DP>*>(tiles_mem);
  constexpr int BQ = BwdTiles<DP>::BQ;
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.splits);
  x /= p.splits;
  const int chunk = static_cast<int>(x % p.chunks);
  x /= p.chunks;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t page = x / p.Hkv;
  const int Bs = p.sets.bt.Bs, D = p.D, G = p.G;
  const int j0 = chunk * kTileKeys, nslot = min(kTileKeys, Bs - j0);
  const int64_t slab = (page * p.Hkv + g) * Bs * int64_t{D};
  const int64_t bucket = page * p.Hb + (p.Hb == 1 ? 0 : g);
  const int w0 = p.inv.begin[bucket], w1 = p.inv.begin[bucket + 1];
  const auto reaches = [&](const Entry& en) {  // some token of the entry reaches this chunk
    return attended_slots(Bs, en.p0 + (en.t1 - 1 - en.t0), en.c) > j0;
  };
  const auto tiles_of = [&](const Entry& en) { return (int64_t{en.t1 - en.t0} * G + BQ - 1) / BQ; };
  int64_t lo = 0, hi = INT64_MAX;  // this split's tiles, numbered over the bucket's entries
  if (p.splits > 1) {
    int64_t n = 0;
    for (int w = w0; w < w1; ++w) {
      const Entry en = p.inv.at(w);
      if (reaches(en)) n += tiles_of(en);
    }
    lo = n * split / p.splits;
    hi = n * (split + 1) / p.splits;
  }
  const auto key_off = [&](int r) { return r < nslot ? slab + int64_t{j0 + r} * D : int64_t{-1}; };
  KeyGrads<DP> acc;
  if (w1 > w0 && hi > lo) stage_keys<DT, DP>(s, p.kc, p.vc, D, key_off);  // slack keys are never summed
  int64_t tile = 0;
  for (int w = w0; w < w1 && tile < hi; ++w) {
    const Entry en = p.inv.at(w);
    if (!reaches(en)) continue;
    const int64_t rows = int64_t{en.t1 - en.t0} * G, nt = tiles_of(en);
    if (tile + nt <= lo) {
      tile += nt;
      continue;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += BQ, ++tile) {
      if (tile < lo || tile >= hi) continue;
      const auto row_of = [&](int r) {
        const int64_t i = r0 + r;
        return i < rows ? (en.t0 + i / G) * p.Hq + g * G + i % G : int64_t{-1};
      };
      __syncthreads();  // K/V staged; the previous query tile is consumed
      stage_queries<DT, DP>(s, p.q, p.dout, p.lse, p.delta, D, row_of);
      for (int r = threadIdx.x; r < BQ; r += kTileThreads)
        s.lim[r] = r0 + r < rows ? attended_slots(Bs, en.p0 + static_cast<int>((r0 + r) / G), en.c) - j0 : 0;
      __syncthreads();
      score_tile<DP, true, true>(s, nslot, p.scale);
      __syncthreads();
      acc.add(s, static_cast<int>(min(int64_t{BQ}, rows - r0)));
    }
  }
  if (p.splits == 1)
    acc.store(p.dk, p.dv, D, key_off);
  else
    acc.store(p.part_dk + split * p.plane, p.part_dv + split * p.plane, D, key_off);
}

// A paged backward call, bound once for the portable kernels below and CUDA's
// tensor-core ones (kernels/attention_backward/mma.cu): `p` with the batch, the selection,
// the tensors, heads, dims, scale and Hb set, plus `out`.
struct PagedBackwardCall {
  PagedGrad p;
  const void* out = nullptr;
  hal::DType dtype = hal::DType::f32;
  int64_t T = 0, P = 0;
};

// How a paged backward call selects its blocks: block_idx (sparse) or every causal block.
struct PagedSelection {
  const hal::Tensor* block_idx = nullptr;  // null: dense
  int Qb = kDenseQb;
  int64_t NQ = 0;
};

// Binds a paged backward call (Args: SparseAttentionBackwardArgs or
// DenseAttentionBackwardArgs).
template <typename Args>
PagedBackwardCall bind_paged_backward(Stream& st, const Args& a, const PagedSelection& sel, hal::OpId op) {
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1), Bs = a.k_cache.dim(2);
  PagedGrad p;
  const bool sparse = sel.block_idx != nullptr;
  p.sets = attend_sets(st, a, T, sel.block_idx, sel.Qb, sel.NQ, op);
  p.q = a.q.template data<void>();
  p.dout = a.dout.template data<void>();
  p.kc = a.k_cache.template data<void>();
  p.vc = a.v_cache.template data<void>();
  p.lse = a.lse.template data<float>();
  p.Hq = static_cast<int>(Hq);
  p.Hkv = static_cast<int>(Hkv);
  p.G = p.Hq / p.Hkv;
  p.D = static_cast<int>(D);
  p.scale = a.scale;
  p.dq = a.dq.template data<float>();
  p.dk = a.dk_cache.template data<float>();
  p.dv = a.dv_cache.template data<float>();
  p.Hb = sparse ? p.sets.Hs : 1;
  return PagedBackwardCall{p, a.out.template data<void>(), a.q.dtype, T, P};
}

inline PagedBackwardCall bind_backward(Stream& st, const ops::SparseAttentionBackwardArgs& a) {
  return bind_paged_backward(st, a, PagedSelection{&a.block_idx, a.Qb, a.NQ},
                             hal::OpId::sparse_block_attention_backward);
}
inline PagedBackwardCall bind_backward(Stream& st, const ops::DenseAttentionBackwardArgs& a) {
  return bind_paged_backward(st, a, PagedSelection{}, hal::OpId::dense_attention_backward);
}

// Runs a bound paged backward call on the portable kernels.
inline void paged_backward_portable(Stream& st, const PagedBackwardCall& call) {
  PagedGrad p = call.p;
  const int64_t T = call.T, P = call.P, Hq = p.Hq, Hkv = p.Hkv, D = p.D, Bs = p.sets.bt.Bs;
  const bool sparse = p.sets.bidx != nullptr;
  p.chunks = static_cast<int>((Bs + kSlotChunk - 1) / kSlotChunk);

  ScratchPlan plan;
  const size_t si_at = plan.reserve<SeqInfo>(p.sets.bt.B);
  const size_t delta_at = plan.reserve<float>(T * Hq);
  const IndexPlan ip(plan, raw_entries(p.sets), P * p.Hb);
  p.splits = dkdv_splits(P * Hkv * p.chunks);
  p.plane = P * Hkv * Bs * D;
  const size_t part_at = plan.reserve<float>(p.splits > 1 ? 2 * p.splits * p.plane : 0);
  char* ws = plan.allocate(st);
  if (p.splits > 1) {
    p.part_dk = reinterpret_cast<float*>(ws + part_at);
    p.part_dv = p.part_dk + p.splits * p.plane;
  }
  auto* si = reinterpret_cast<SeqInfo*>(ws + si_at);
  auto* delta = reinterpret_cast<float*>(ws + delta_at);
  p.sets.si = si;
  p.delta = delta;
  launch_seq_info(st, p.sets, sparse, si);
  p.inv = build_inverse(st, p.sets, p.Hb, ip, ws);
  constexpr int kDeltaThreads = 256;
  MSA_DISPATCH_ACT(call.dtype, DT, {
    if (T > 0) {
      tile_delta_kernel<DT, kDeltaThreads>
          <<<grid_for(T * Hq, kDeltaThreads, st.props()), kDeltaThreads, 0, st.native()>>>(p.dout, call.out, T * Hq,
                                                                                           p.D, delta);
      MSA_CUDA_CHECK_LAUNCH();
    }
    MSA_DISPATCH_TILE_DP(D, DP, {
      if (T > 0) {
        const DqTiling tl(p.G, BwdTiles<DP>::BQ);
        const int64_t tiles = (T + tl.tile_tokens - 1) / tl.tile_tokens;
        const int smem = tiles_smem<paged_dq_kernel<DT, DP>, DP>(st);
        paged_dq_kernel<DT, DP>
            <<<static_cast<unsigned>(tiles * Hkv * tl.head_chunks), kTileThreads, smem, st.native()>>>(p, tl, T);
        MSA_CUDA_CHECK_LAUNCH();
      }
      if (P > 0 && Bs > 0) {
        const int smem = tiles_smem<paged_dkdv_kernel<DT, DP>, DP>(st);
        paged_dkdv_kernel<DT, DP>
            <<<static_cast<unsigned>(P * Hkv * p.chunks * p.splits), kTileThreads, smem, st.native()>>>(p);
        MSA_CUDA_CHECK_LAUNCH();
        if (p.splits > 1) {
          constexpr int kMergeThreads = 256;
          dkdv_merge_kernel<kMergeThreads>
              <<<grid_for(p.plane, kMergeThreads, st.props()), kMergeThreads, 0, st.native()>>>(p);
          MSA_CUDA_CHECK_LAUNCH();
        }
      }
    });
  });
}

}  // namespace msa::MSA_GPU_NS
