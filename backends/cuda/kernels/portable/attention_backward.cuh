// The gradients of paged attention (sparse_block_attention_backward,
// dense_attention_backward) in f32, deterministic run to run:
//  - delta_kernel: delta = dot(dout, out) per query row;
//  - paged_dq_kernel: one CTA per (token, KV head) walks the token's attended blocks; each
//    warp takes every kWarps-th key slot of a block for the G query heads of the group,
//    keeping dq in registers, and the warps' partials are summed in warp order;
//  - paged_dkdv_kernel: one CTA per (page, KV head, kSlotChunk key slots) loops over the
//    entries that attended the slab, from the inverse index (training_index.cuh), token
//    by token; each warp owns its slots' dk / dv rows in registers. Slots no query
//    attended stay 0; keys past a sequence's kv_len (slack slots) are never read into a sum.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/training_index.cuh"
#include "backends/cuda/kernels/portable/training_rows.cuh"
#include "hal/op_id.h"

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
};

// Rows h0 .. h0 + n - 1 of token t's q and dout as zero-padded f32 rows, and their lse
// and delta. Call with every thread of the block (ends with a barrier).
template <int DT, int kThreads>
__device__ __forceinline__ void stage_group_rows(const PagedGrad& p, int64_t t, int h0, int n,
                                                 float (*s_q)[kMaxHeadDim], float (*s_do)[kMaxHeadDim],
                                                 float* s_lse, float* s_delta) {
  using T = typename Elem<DT>::T;
  for (int i = threadIdx.x; i < n * kMaxHeadDim; i += kThreads) {
    const int h = i / kMaxHeadDim, d = i % kMaxHeadDim;
    const int64_t at = (t * p.Hq + h0 + h) * p.D + d;
    s_q[h][d] = d < p.D ? Elem<DT>::load(static_cast<const T*>(p.q)[at]) : 0.0f;
    s_do[h][d] = d < p.D ? Elem<DT>::load(static_cast<const T*>(p.dout)[at]) : 0.0f;
  }
  for (int h = threadIdx.x; h < n; h += kThreads) {
    s_lse[h] = p.lse[t * p.Hq + h0 + h];
    s_delta[h] = p.delta[t * p.Hq + h0 + h];
  }
  __syncthreads();
}

// grid: T x Hkv.
template <int DT, int kThreads>
__global__ void __launch_bounds__(kThreads) paged_dq_kernel(PagedGrad p) {
  constexpr int kWarps = kThreads / kWarp;
  __shared__ float s_q[kMaxGroup][kMaxHeadDim], s_do[kMaxGroup][kMaxHeadDim];
  __shared__ float s_lse[kMaxGroup], s_delta[kMaxGroup], s_red[kMaxHeadDim];
  const int64_t t = blockIdx.x / p.Hkv;
  const int g = static_cast<int>(blockIdx.x % p.Hkv);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int Bs = p.sets.bt.Bs, D = p.D;
  stage_group_rows<DT, kThreads>(p, t, g * p.G, p.G, s_q, s_do, s_lse, s_delta);
  const TokenAt tk = find_token(p.sets, static_cast<int>(t));
  float acc[kMaxGroup][kLaneDims] = {};
  const int row = p.sets.Hs == 1 ? 0 : g;
  for_each_attended(p.sets, tk, row, [&](int, int64_t page, int slots) {
    const int64_t slab = (page * p.Hkv + g) * Bs * int64_t{D};
    for (int j = warp; j < slots; j += kWarps) {
      float kr[kLaneDims], vr[kLaneDims];
      lane_row<DT>(p.kc, slab + int64_t{j} * D, D, lane, kr);
      lane_row<DT>(p.vc, slab + int64_t{j} * D, D, lane, vr);
#pragma unroll
      for (int h = 0; h < kMaxGroup; ++h) {
        if (h < p.G && !is_neg_inf(s_lse[h])) {
          float qr[kLaneDims], dr[kLaneDims];
          lane_row_f32(s_q[h], lane, qr);
          lane_row_f32(s_do[h], lane, dr);
          const float pr = expf(p.scale * lane_dot(qr, kr) - s_lse[h]);
          const float ds = pr * (lane_dot(dr, vr) - s_delta[h]);
          lane_axpy(acc[h], p.scale * ds, kr);
        }
      }
    }
  });
  float* dq = p.dq + (t * p.Hq + g * p.G) * D;
#pragma unroll
  for (int h = 0; h < kMaxGroup; ++h) {
    if (h < p.G) {
      sum_warp_rows<kThreads>(acc[h], D, s_red);
      for (int d = threadIdx.x; d < D; d += kThreads) dq[int64_t{h} * D + d] = s_red[d];
      __syncthreads();  // s_red is reused by the next head
    }
  }
}

// grid: P x Hkv x chunks.
template <int DT, int kThreads>
__global__ void __launch_bounds__(kThreads) paged_dkdv_kernel(PagedGrad p) {
  constexpr int kWarps = kThreads / kWarp, kSpw = kSlotChunk / kWarps;
  static_assert(kSpw >= 1 && kSpw * kWarps == kSlotChunk, "kSlotChunk must split evenly over the warps");
  __shared__ float s_q[kMaxGroup][kMaxHeadDim], s_do[kMaxGroup][kMaxHeadDim];
  __shared__ float s_lse[kMaxGroup], s_delta[kMaxGroup];
  int64_t x = blockIdx.x;
  const int chunk = static_cast<int>(x % p.chunks);
  x /= p.chunks;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t page = x / p.Hkv;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int Bs = p.sets.bt.Bs, D = p.D;
  const int j0 = chunk * kSlotChunk + warp * kSpw;  // this warp's first slot
  const int64_t slab = (page * p.Hkv + g) * Bs * int64_t{D};
  const int64_t bucket = page * p.Hb + (p.Hb == 1 ? 0 : g);
  const int w0 = p.inv.begin[bucket], w1 = p.inv.begin[bucket + 1];
  float kr[kSpw][kLaneDims], vr[kSpw][kLaneDims], ak[kSpw][kLaneDims] = {}, av[kSpw][kLaneDims] = {};
#pragma unroll
  for (int s = 0; s < kSpw; ++s) {
    const bool live = w1 > w0 && j0 + s < Bs;  // slot memory exists (slack keys are never summed)
    lane_row<DT>(p.kc, slab + int64_t{live ? j0 + s : 0} * D, live ? D : 0, lane, kr[s]);
    lane_row<DT>(p.vc, slab + int64_t{live ? j0 + s : 0} * D, live ? D : 0, lane, vr[s]);
  }
  for (int w = w0; w < w1; ++w) {
    const Entry en = p.inv.at(w);
    for (int t = en.t0; t < en.t1; ++t) {
      const int slots = attended_slots(Bs, en.p0 + (t - en.t0), en.c);
      __syncthreads();  // the previous token's rows are no longer read
      stage_group_rows<DT, kThreads>(p, t, g * p.G, p.G, s_q, s_do, s_lse, s_delta);
      if (j0 >= slots) continue;  // uniform per warp
      for (int h = 0; h < p.G; ++h) {
        if (is_neg_inf(s_lse[h])) continue;
        float qr[kLaneDims], dr[kLaneDims];
        lane_row_f32(s_q[h], lane, qr);
        lane_row_f32(s_do[h], lane, dr);
#pragma unroll
        for (int s = 0; s < kSpw; ++s) {
          if (j0 + s < slots) {
            const float pr = expf(p.scale * lane_dot(qr, kr[s]) - s_lse[h]);
            const float ds = pr * (lane_dot(dr, vr[s]) - s_delta[h]);
            lane_axpy(ak[s], p.scale * ds, qr);
            lane_axpy(av[s], pr, dr);
          }
        }
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kSpw; ++s) {
    if (j0 + s >= Bs) continue;
    store_lane_row(ak[s], D, lane, p.dk + slab + int64_t{j0 + s} * D);
    store_lane_row(av[s], D, lane, p.dv + slab + int64_t{j0 + s} * D);
  }
}

// How a paged backward call selects its blocks: block_idx (sparse) or every causal block.
struct PagedSelection {
  const hal::Tensor* block_idx = nullptr;  // null: dense
  int Qb = kDenseQb;
  int64_t NQ = 0;
};

// Runs a paged backward call (Args: SparseAttentionBackwardArgs or
// DenseAttentionBackwardArgs).
template <typename Args>
void paged_backward(Stream& st, const Args& a, const PagedSelection& sel, hal::OpId op) {
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1), Bs = a.k_cache.dim(2);
  PagedGrad p;
  p.sets.bt = paged_batch(st, a.cu_q, a.kv_len, a.block_table, a.k_cache, T, op);
  const bool sparse = sel.block_idx != nullptr;
  if (sparse) {
    p.sets.bidx = sel.block_idx->data<int32_t>();
    p.sets.k = static_cast<int>(sel.block_idx->dim(2));
    p.sets.Hs = static_cast<int>(sel.block_idx->dim(1));
    p.sets.Qb = sel.Qb;
    p.sets.NQ = sel.NQ;
  } else {
    p.sets.NQ = p.sets.bt.B;
  }
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
  p.chunks = static_cast<int>((Bs + kSlotChunk - 1) / kSlotChunk);

  ScratchPlan plan;
  const size_t si_at = plan.reserve<SeqInfo>(p.sets.bt.B);
  const size_t delta_at = plan.reserve<float>(T * Hq);
  const IndexPlan ip(plan, raw_entries(p.sets), P * p.Hb);
  char* ws = plan.allocate(st);
  auto* si = reinterpret_cast<SeqInfo*>(ws + si_at);
  auto* delta = reinterpret_cast<float*>(ws + delta_at);
  p.sets.si = si;
  p.delta = delta;
  launch_seq_info(st, p.sets, sparse, si);
  p.inv = build_inverse(st, p.sets, p.Hb, ip, ws);
  constexpr int kDeltaThreads = 256, kDqThreads = 128, kSlabThreads = 256;
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    if (T > 0) {
      delta_kernel<DT, kDeltaThreads><<<grid_for(T * Hq * kWarp, kDeltaThreads, st.props()), kDeltaThreads, 0,
                                        st.native()>>>(p.dout, a.out.template data<void>(), T * Hq, p.D, delta);
      MSA_CUDA_CHECK_LAUNCH();
      paged_dq_kernel<DT, kDqThreads><<<static_cast<unsigned>(T * Hkv), kDqThreads, 0, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    }
    if (P > 0 && Bs > 0) {
      paged_dkdv_kernel<DT, kSlabThreads>
          <<<static_cast<unsigned>(P * Hkv * p.chunks), kSlabThreads, 0, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace msa::MSA_GPU_NS
