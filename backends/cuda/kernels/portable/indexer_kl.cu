// indexer_kl: KL(target || student) per (token, selection head) and its gradients dqi,
// dki_cache in f32, deterministic (no float atomics):
//  - kl_rows_kernel, one CTA per (token, selection head): pass 1 the student's logsumexp
//    over the attended slots (online, per warp, merged in warp order), pass 2 kl and dqi
//    from the target p (the mean over the group's query heads of exp(scale q.k - lse),
//    recomputed) and u; it keeps the logsumexp for the next kernel.
//  - kl_dki_kernel, one CTA per (page, kSlotChunk key slots): loops over the entries that
//    attended the page (inverse index, training_index.cuh), recomputing each slot's
//    logit gradient dkl * scale_i * (u - p) instead of storing it; each warp owns its
//    slots' dki rows in registers.
// The token sets and their device checks are those of the forward attention ops.
#include <type_traits>

#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/training_index.cuh"
#include "backends/cuda/kernels/portable/training_rows.cuh"

namespace msa::MSA_GPU_NS {
namespace {

struct KlParams {
  AttendSets sets;
  const void* qi = nullptr;  // [T][Hs][Di], dtype qi_dt
  const void* ki = nullptr;  // [P][Bs][Di]
  const void* q = nullptr;   // [T][Hq][D]
  const void* kc = nullptr;  // [P][Hkv][Bs][D]
  const float* lse = nullptr;
  const float* dkl = nullptr;  // null: all ones
  int qi_dt = kF32;
  int Hq = 1, Hkv = 1, G = 1, D = 0, Hs = 1, Di = 0;
  bool shared = false;
  float scale = 1.0f, scale_i = 1.0f;
  float* kl = nullptr;
  float* dqi = nullptr;
  float* dki = nullptr;
  float* lse_u = nullptr;  // scratch [T][Hs]: the student's logsumexp
  InverseIndex inv;
  int chunks = 1;
};

// Token t's qi row of selection head g as a zero-padded f32 row in shared memory. Call
// with every thread of the block (ends with a barrier).
template <int kThreads>
__device__ __forceinline__ void stage_qi(const KlParams& p, int64_t t, int g, float* s_qi) {
  for (int d = threadIdx.x; d < kMaxHeadDim; d += kThreads)
    s_qi[d] = d < p.Di ? load_any(p.qi, p.qi_dt, (t * p.Hs + g) * p.Di + d) : 0.0f;
  __syncthreads();
}

// The target p of key slot j of `page` for token t and selection head g: the mean over
// the group's query heads (a head whose lse is -inf adds nothing). Call with the wave.
template <int DT>
__device__ __forceinline__ float target_p(const KlParams& p, int64_t t, int g, int64_t page, int j, int lane) {
  const int h0 = p.shared ? 0 : g * p.G, nh = p.shared ? p.Hq : p.G;
  const int Bs = p.sets.bt.Bs;
  float sum = 0.0f;
  for (int kh = h0 / p.G; kh < (h0 + nh) / p.G; ++kh) {
    float kr[kLaneDims];
    lane_row<DT>(p.kc, ((page * p.Hkv + kh) * Bs + j) * int64_t{p.D}, p.D, lane, kr);
    for (int h = kh * p.G; h < (kh + 1) * p.G; ++h) {
      const float l = p.lse[t * p.Hq + h];
      if (is_neg_inf(l)) continue;
      float qr[kLaneDims];
      lane_row<DT>(p.q, (t * p.Hq + h) * int64_t{p.D}, p.D, lane, qr);
      sum += expf(p.scale * lane_dot(qr, kr) - l);
    }
  }
  return sum / static_cast<float>(nh);
}

// grid: T x Hs.
template <int DT, int KT, int kThreads>
__global__ void __launch_bounds__(kThreads) kl_rows_kernel(KlParams p) {
  constexpr int kWarps = kThreads / kWarp;
  __shared__ float s_qi[kMaxHeadDim], s_red[kMaxHeadDim], s_m[kWarps], s_s[kWarps], s_kl[kWarps];
  const int64_t t = blockIdx.x / p.Hs;
  const int g = static_cast<int>(blockIdx.x % p.Hs);
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int Bs = p.sets.bt.Bs;
  stage_qi<kThreads>(p, t, g, s_qi);
  float qir[kLaneDims];
  lane_row_f32(s_qi, lane, qir);
  const TokenAt tk = find_token(p.sets, static_cast<int>(t));
  const int row = p.sets.Hs == 1 ? 0 : g;
  const auto logit = [&](int64_t page, int j, float (&kir)[kLaneDims]) {
    lane_row<KT>(p.ki, (page * Bs + j) * int64_t{p.Di}, p.Di, lane, kir);
    return p.scale_i * lane_dot(qir, kir);
  };
  // Pass 1: the student's logsumexp.
  float m = -__int_as_float(0x7f800000), sum = 0.0f;
  int64_t n = 0;
  for_each_attended(p.sets, tk, row, [&](int, int64_t page, int slots) {
    for (int j = warp; j < slots; j += kWarps) {
      float kir[kLaneDims];
      const float l = logit(page, j, kir);
      if (l > m) {
        sum = sum * expf(m - l) + 1.0f;
        m = l;
      } else {
        sum += expf(l - m);
      }
    }
    n += slots;
  });
  const int64_t slot = t * p.Hs + g;
  float* dqi = p.dqi + slot * p.Di;
  if (n == 0) {  // empty set: kl 0, no gradient (uniform over the block)
    for (int d = threadIdx.x; d < p.Di; d += kThreads) dqi[d] = 0.0f;
    if (threadIdx.x == 0) p.kl[slot] = 0.0f;
    return;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_s[warp] = sum;
  }
  __syncthreads();
  float mx = s_m[0];
  for (int w = 1; w < kWarps; ++w) mx = fmaxf(mx, s_m[w]);
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    if (s_s[w] > 0.0f) total += s_s[w] * expf(s_m[w] - mx);
  const float lse_u = mx + logf(total);
  // Pass 2: kl and dqi.
  const float wgt = (p.dkl != nullptr ? p.dkl[slot] : 1.0f) * p.scale_i;
  float kl = 0.0f, acc[kLaneDims] = {};
  for_each_attended(p.sets, tk, row, [&](int, int64_t page, int slots) {
    for (int j = warp; j < slots; j += kWarps) {
      float kir[kLaneDims];
      const float lu = logit(page, j, kir) - lse_u;
      const float pt = target_p<DT>(p, t, g, page, j, lane);
      if (pt != 0.0f) kl += pt * (logf(pt) - lu);
      lane_axpy(acc, wgt * (expf(lu) - pt), kir);
    }
  });
  if (lane == 0) s_kl[warp] = kl;
  sum_warp_rows<kThreads>(acc, p.Di, s_red);  // its barriers also publish s_kl
  for (int d = threadIdx.x; d < p.Di; d += kThreads) dqi[d] = s_red[d];
  if (threadIdx.x == 0) {
    float k = 0.0f;
    for (int w = 0; w < kWarps; ++w) k += s_kl[w];
    p.kl[slot] = k;
    p.lse_u[slot] = lse_u;
  }
}

// grid: P x chunks.
template <int DT, int KT, int kThreads>
__global__ void __launch_bounds__(kThreads) kl_dki_kernel(KlParams p) {
  constexpr int kWarps = kThreads / kWarp, kSpw = kSlotChunk / kWarps;
  static_assert(kSpw >= 1 && kSpw * kWarps == kSlotChunk, "kSlotChunk must split evenly over the warps");
  __shared__ float s_qi[kMaxHeadDim];
  const int chunk = static_cast<int>(blockIdx.x % p.chunks);
  const int64_t page = blockIdx.x / p.chunks;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int Bs = p.sets.bt.Bs, Di = p.Di;
  const int j0 = chunk * kSlotChunk + warp * kSpw;  // this warp's first slot
  const int w0 = p.inv.begin[page], w1 = p.inv.begin[page + 1];
  const int64_t slab = page * Bs * int64_t{Di};
  float kir[kSpw][kLaneDims], acc[kSpw][kLaneDims] = {};
#pragma unroll
  for (int s = 0; s < kSpw; ++s) {
    const bool live = w1 > w0 && j0 + s < Bs;
    lane_row<KT>(p.ki, slab + int64_t{live ? j0 + s : 0} * Di, live ? Di : 0, lane, kir[s]);
  }
  for (int w = w0; w < w1; ++w) {
    const Entry en = p.inv.at(w);
    const int g0 = en.hs < 0 ? 0 : en.hs, g1 = en.hs < 0 ? p.Hs : en.hs + 1;
    for (int t = en.t0; t < en.t1; ++t) {
      const int slots = attended_slots(Bs, en.p0 + (t - en.t0), en.c);
      for (int g = g0; g < g1; ++g) {
        __syncthreads();  // the previous row's qi is no longer read
        stage_qi<kThreads>(p, t, g, s_qi);
        if (j0 >= slots) continue;  // uniform per warp
        float qir[kLaneDims];
        lane_row_f32(s_qi, lane, qir);
        const int64_t slot = int64_t{t} * p.Hs + g;
        const float lse_u = p.lse_u[slot];
        const float wgt = (p.dkl != nullptr ? p.dkl[slot] : 1.0f) * p.scale_i;
#pragma unroll
        for (int s = 0; s < kSpw; ++s) {
          if (j0 + s < slots) {
            const float lu = p.scale_i * lane_dot(qir, kir[s]) - lse_u;
            const float pt = target_p<DT>(p, t, g, page, j0 + s, lane);
            lane_axpy(acc[s], wgt * (expf(lu) - pt), qir);
          }
        }
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kSpw; ++s)
    if (j0 + s < Bs) store_lane_row(acc[s], Di, lane, p.dki + slab + int64_t{j0 + s} * Di);
}

}  // namespace

void indexer_kl(hal::Stream& s, const ops::IndexerKlArgs& a) {
  auto& st = gpu_stream(s);
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1), Bs = a.k_cache.dim(2);
  const int64_t Hs = a.qi.dim(1), Di = a.qi.dim(2);
  const bool sparse = a.stage == ops::KlStage::sparse;
  KlParams p;
  p.sets.bt = paged_batch(st, a.cu_q, a.kv_len, a.block_table, a.k_cache, T, hal::OpId::indexer_kl);
  if (sparse) {
    p.sets.bidx = a.block_idx.data<int32_t>();
    p.sets.k = static_cast<int>(a.block_idx.dim(2));
    p.sets.Hs = static_cast<int>(a.block_idx.dim(1));
    p.sets.Qb = a.Qb;
    p.sets.NQ = a.NQ;
  } else {
    p.sets.NQ = p.sets.bt.B;
  }
  p.qi = a.qi.data<void>();
  p.ki = a.ki_cache.data<void>();
  p.q = a.q.data<void>();
  p.kc = a.k_cache.data<void>();
  p.lse = a.lse.data<float>();
  p.dkl = a.dkl.present() ? a.dkl.data<float>() : nullptr;
  p.qi_dt = dt_code(a.qi.dtype);
  p.Hq = static_cast<int>(Hq);
  p.Hkv = static_cast<int>(Hkv);
  p.G = p.Hq / p.Hkv;
  p.D = static_cast<int>(D);
  p.Hs = static_cast<int>(Hs);
  p.Di = static_cast<int>(Di);
  p.shared = a.mode == ops::SelectionMode::shared;
  p.scale = a.scale;
  p.scale_i = a.scale_i;
  p.kl = a.kl.data<float>();
  p.dqi = a.dqi.data<float>();
  p.dki = a.dki_cache.data<float>();
  p.chunks = static_cast<int>((Bs + kSlotChunk - 1) / kSlotChunk);

  ScratchPlan plan;
  const size_t si_at = plan.reserve<SeqInfo>(p.sets.bt.B);
  const size_t lse_at = plan.reserve<float>(T * Hs);
  const IndexPlan ip(plan, raw_entries(p.sets), P);  // dki has no head: one bucket per page
  char* ws = plan.allocate(st);
  p.sets.si = reinterpret_cast<SeqInfo*>(ws + si_at);
  p.lse_u = reinterpret_cast<float*>(ws + lse_at);
  launch_seq_info(st, p.sets, sparse, reinterpret_cast<SeqInfo*>(ws + si_at));
  p.inv = build_inverse(st, p.sets, 1, ip, ws);
  constexpr int kRowThreads = 128, kSlabThreads = 256;
  const auto run = [&](auto dt, auto kt) {
    constexpr int DT = decltype(dt)::value, KT = decltype(kt)::value;
    if (T > 0 && Hs > 0) {
      kl_rows_kernel<DT, KT, kRowThreads><<<static_cast<unsigned>(T * Hs), kRowThreads, 0, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    }
    if (P > 0 && Bs > 0) {
      kl_dki_kernel<DT, KT, kSlabThreads><<<static_cast<unsigned>(P * p.chunks), kSlabThreads, 0, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    }
  };
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    if (a.ki_cache.dtype == hal::DType::f32)
      run(std::integral_constant<int, DT>{}, std::integral_constant<int, kF32>{});
    else
      run(std::integral_constant<int, DT>{}, std::integral_constant<int, kBF16>{});
  });
}

}  // namespace msa::MSA_GPU_NS
