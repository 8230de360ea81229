// CUDA-only attention core on tensor cores (wmma, sm_80+) for bf16/f16 inputs: the same
// contract, tiling and row table as the portable FMA core (attention_core.cuh), with
// S = Q K^T and O += P V as 16x16x16 MMAs accumulating in f32. q is used unscaled (the
// scale is applied to S in f32: no extra rounding of q); the probabilities are rounded
// to the input dtype before P V (allowed by the contract); O stays in f32 in shared
// memory (accumulator fragments have no documented row layout, so the per-row rescale
// by alpha is done there).
#pragma once
#include <mma.h>

#include "backends/cuda/kernels/portable/attention_core.cuh"

namespace msa::cuda {

template <int DT>
struct WmmaType;
template <>
struct WmmaType<kBF16> {
  using T = __nv_bfloat16;
};
template <>
struct WmmaType<kF16> {
  using T = __half;
};

template <int DT, int DP>
struct TcLayout {
  static constexpr int ES = 2;
  static constexpr int QROW = DP + 8;   // elements (16-bit)
  static constexpr int KROW = DP + 8;   // elements
  static constexpr int SROW = kBK + 4;  // floats
  static constexpr int PROW = kBK + 8;  // elements
  static constexpr int OROW = DP + 4;   // floats
  static constexpr int CPRP = DP * ES / 16;
  static constexpr int NCH = kBK * CPRP / kAttnThreads;
  static constexpr int al(int x) { return (x + 127) / 128 * 128; }
  static constexpr int Q_OFF = 0;
  static constexpr int K_OFF = al(Q_OFF + kRows * QROW * 2);
  static constexpr int V_OFF = al(K_OFF + kBK * KROW * 2);
  static constexpr int S_OFF = al(V_OFF + kBK * KROW * 2);
  static constexpr int P_OFF = al(S_OFF + 2 * kRows * SROW * 4);
  static constexpr int O_OFF = al(P_OFF + kRows * PROW * 2);
  static constexpr int STAT_OFF = al(O_OFF + kRows * OROW * 4);
  static constexpr int ROW_OFF = al(STAT_OFF + 3 * kRows * 4);
  static constexpr int BYTES = ROW_OFF + kRows * 8 + kRows * 4;
};

template <int DT, int DP, class Src>
__device__ void attend_tc(char* smem, const void* q_ptr, int D, float scale_log2, const Src& src, int ntiles,
                          const AttnOut& o) {
  namespace wm = nvcuda::wmma;
  using L = TcLayout<DT, DP>;
  using T = typename Elem<DT>::T;
  using W = typename WmmaType<DT>::T;
  T* qs = reinterpret_cast<T*>(smem + L::Q_OFF);
  T* ks = reinterpret_cast<T*>(smem + L::K_OFF);
  T* vs = reinterpret_cast<T*>(smem + L::V_OFF);
  float* ss = reinterpret_cast<float*>(smem + L::S_OFF);
  T* ps = reinterpret_cast<T*>(smem + L::P_OFF);
  float* os = reinterpret_cast<float*>(smem + L::O_OFF);
  float* alpha_s = reinterpret_cast<float*>(smem + L::STAT_OFF);
  float* m_s = alpha_s + kRows;
  float* l_s = m_s + kRows;
  const int64_t* row_id = attn_row_id<L>(smem);
  const int* row_lim = attn_row_lim<L>(smem);
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const T* q = static_cast<const T*>(q_ptr);
  const float ninf = -FLT_MAX * 2.0f;

  for (int i = tid; i < kRows * DP; i += kAttnThreads) {
    const int r = i / DP, d = i % DP;
    const int64_t id = row_id[r];
    qs[r * L::QROW + d] = (id >= 0 && d < D) ? q[id * D + d] : T{0};
  }
  for (int i = tid; i < kRows * DP; i += kAttnThreads) os[(i / DP) * L::OROW + i % DP] = 0.0f;
  int max_lim = -1;
#pragma unroll
  for (int r = 0; r < kRows; ++r) max_lim = max(max_lim, row_lim[r]);

  const int r0 = kRPW * warp;
  float m_run[kRPW], l_run[kRPW];
  int lim_r[kRPW];
#pragma unroll
  for (int rr = 0; rr < kRPW; ++rr) {
    m_run[rr] = ninf;
    l_run[rr] = 0.0f;
    lim_r[rr] = row_lim[r0 + rr];
  }

  const int cprd = D * L::ES / 16;
  uint4 kreg[L::NCH], vreg[L::NCH];
  Tile cur, nxt;
  auto find = [&](int from, Tile& t) {
    int i = from;
    while (i < ntiles && !(src.tile(i, t) && t.nkeys > 0 && t.kpos0 <= max_lim)) ++i;
    return i;
  };
  auto prefetch = [&](const Tile& t) {
#pragma unroll
    for (int c = 0; c < L::NCH; ++c) {
      const int lin = tid + c * kAttnThreads, j = lin / L::CPRP, ch = lin % L::CPRP;
      const bool ok = j < t.nkeys && ch < cprd;
      const int64_t off = (j * t.stride) * L::ES + ch * 16;
      kreg[c] = ok ? ldg16(static_cast<const char*>(t.k) + off) : make_uint4(0, 0, 0, 0);
      vreg[c] = ok ? ldg16(static_cast<const char*>(t.v) + off) : make_uint4(0, 0, 0, 0);
    }
  };

  int i = find(0, cur);
  if (i < ntiles) prefetch(cur);
  while (i < ntiles) {
    __syncthreads();
#pragma unroll
    for (int c = 0; c < L::NCH; ++c) {
      const int lin = tid + c * kAttnThreads, j = lin / L::CPRP, ch = lin % L::CPRP;
      *reinterpret_cast<uint4*>(reinterpret_cast<char*>(ks + j * L::KROW) + ch * 16) = kreg[c];
      *reinterpret_cast<uint4*>(reinterpret_cast<char*>(vs + j * L::KROW) + ch * 16) = vreg[c];
    }
    __syncthreads();
    const int ni = find(i + 1, nxt);
    if (ni < ntiles) prefetch(nxt);

    // S halves: warp w computes keys [16 (w%4), +16) over its half of the head dim.
    {
      constexpr int KSTEPS = DP / 16, HALF = KSTEPS / 2;
      const int nt = warp % 4, hf = warp / 4;
      wm::fragment<wm::accumulator, 16, 16, 16, float> acc;
      wm::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = hf * HALF; kk < (hf + 1) * HALF; ++kk) {
        wm::fragment<wm::matrix_a, 16, 16, 16, W, wm::row_major> fa;
        wm::fragment<wm::matrix_b, 16, 16, 16, W, wm::col_major> fb;
        wm::load_matrix_sync(fa, reinterpret_cast<const W*>(qs + kk * 16), L::QROW);
        wm::load_matrix_sync(fb, reinterpret_cast<const W*>(ks + nt * 16 * L::KROW + kk * 16), L::KROW);
        wm::mma_sync(acc, fa, fb, acc);
      }
      wm::store_matrix_sync(ss + hf * kRows * L::SROW + nt * 16, acc, L::SROW, wm::mem_row_major);
    }
    __syncthreads();

    // Online softmax over the tile (warp w: rows r0..; lane: keys lane + 32 kk).
#pragma unroll
    for (int rr = 0; rr < kRPW; ++rr) {
      const int r = r0 + rr;
      bool vk[kKPL];
      float a[kKPL];
      float mt = ninf, bad = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKPL; ++kk) {
        const int j = lane + kWarp * kk;
        vk[kk] = j < cur.nkeys && cur.kpos0 + j <= lim_r[rr];
        const float sv = (ss[r * L::SROW + j] + ss[(kRows + r) * L::SROW + j]) * scale_log2;
        a[kk] = vk[kk] ? sv : ninf;
        if (vk[kk] && nonfinite(sv)) bad = 1.0f;
        mt = fmaxf(mt, a[kk]);
      }
      mt = warp_max(mt);
      bad = warp_max(bad);
      const float mn = fmaxf(m_run[rr], mt);
      float alpha = 1.0f, psum = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kKPL; ++kk) {
        const float pv = (mn != ninf && vk[kk]) ? exp2f(a[kk] - mn) : 0.0f;
        psum += pv;
        ps[r * L::PROW + lane + kWarp * kk] = Elem<DT>::store(pv);
      }
      if (mn != ninf) alpha = m_run[rr] == ninf ? 0.0f : exp2f(m_run[rr] - mn);
      // A visible logit that is not finite makes the row NaN for good (docs/spec.md,
      // "Non-finite inputs").
      l_run[rr] = bad > 0.0f ? quiet_nan() : l_run[rr] * alpha + warp_sum(psum);
      m_run[rr] = mn;
      if (lane == 0) alpha_s[r] = alpha;
    }
    __syncthreads();
    for (int e = tid; e < kRows * DP; e += kAttnThreads) os[(e / DP) * L::OROW + e % DP] *= alpha_s[e / DP];
    __syncthreads();

    // O[:, 16 w .. +16) += P V.
    if (warp < DP / 16) {
      wm::fragment<wm::accumulator, 16, 16, 16, float> acc;
      wm::load_matrix_sync(acc, os + warp * 16, L::OROW, wm::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        wm::fragment<wm::matrix_a, 16, 16, 16, W, wm::row_major> fa;
        wm::fragment<wm::matrix_b, 16, 16, 16, W, wm::row_major> fb;
        wm::load_matrix_sync(fa, reinterpret_cast<const W*>(ps + kk * 16), L::PROW);
        wm::load_matrix_sync(fb, reinterpret_cast<const W*>(vs + kk * 16 * L::KROW + warp * 16), L::KROW);
        wm::mma_sync(acc, fa, fb, acc);
      }
      wm::store_matrix_sync(os + warp * 16, acc, L::OROW, wm::mem_row_major);
    }
    cur = nxt;
    i = ni;
  }

  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int rr = 0; rr < kRPW; ++rr) {
      m_s[r0 + rr] = m_run[rr];
      l_s[r0 + rr] = l_run[rr];
    }
  }
  __syncthreads();
  // A non-finite accumulated value marks its row too (every writer stores the same NaN).
  for (int e = tid; e < kRows * D; e += kAttnThreads)
    if (nonfinite(os[(e / D) * L::OROW + e % D])) l_s[e / D] = quiet_nan();
  __syncthreads();
  for (int e = tid; e < kRows * D; e += kAttnThreads) {
    const int r = e / D, d = e % D;
    const int64_t id = row_id[r];
    if (id < 0) continue;
    const float l = l_s[r];
    const bool nan_row = l != l, empty = !(l > 0.0f);
    const float v = nan_row ? quiet_nan() : empty ? 0.0f : os[r * L::OROW + d] / l;
    const float lse = nan_row ? quiet_nan() : empty ? ninf : (m_s[r] + log2f(l)) * 0.69314718055994531f;
    if (o.part_o != nullptr) {
      o.part_o[(int64_t{o.split} * o.rows_total + id) * D + d] = v;
      if (d == 0) o.part_lse[int64_t{o.split} * o.rows_total + id] = lse;
    } else {
      static_cast<T*>(o.out)[id * D + d] = Elem<DT>::store(v);
      if (d == 0) o.lse[id] = lse;
    }
  }
}

struct TcCore {
  template <int DT, int DP>
  using Layout = TcLayout<DT, DP>;
  template <int DT, int DP, class Src>
  static __device__ __forceinline__ void run(char* smem, const void* q, int D, float scale, const Src& src, int ntiles,
                                             const AttnOut& o) {
    attend_tc<DT, DP>(smem, q, D, scale * 1.4426950408889634f, src, ntiles, o);
  }
};

}  // namespace msa::cuda
