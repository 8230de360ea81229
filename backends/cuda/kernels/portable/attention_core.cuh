// The portable attention core shared by sparse_block_attention, dense_attention and
// patch_attention_3d: one thread block serves up to kRows query rows (a GQA group of
// heads x a few tokens) that share one KV head, streaming KV tiles of kBK keys through
// shared memory with an online softmax (base 2, scale * log2(e) folded into q). Plain
// f32 FMA arithmetic (no tensor cores, no TF32): the HIP backend compiles this too.
//
// Per tile: K and V rows are loaded with 16-byte loads into registers one tile ahead
// (prefetch) and stored to padded shared rows (conflict-free); S = Q K^T with warp w
// owning kRPW rows and lane l keys l, l + warp width (2 x 2 on CUDA); the P V product with thread t owning
// row t/16 and DP/16 consecutive dims. Keys past the valid range are zero-filled and
// masked, so NaN in cache slack never reaches an output.
//
// Output: either final (out in the input dtype, lse f32) or, for split-KV, a partial
// (f32 o already divided by its l, and its lse) merged later in fixed split order.
#pragma once
#include <cfloat>
#include <cstdint>

#include "backends/cuda/common.cuh"

namespace msa::MSA_GPU_NS {

constexpr int kAttnThreads = 256, kRows = 16, kBK = 64;
static_assert(kAttnThreads == 16 * kRows, "PV mapping: 16 threads per row");
// S-step mapping: each warp owns kRPW rows, each lane kKPL keys (lane + kWarp * i).
constexpr int kRPW = kRows * kWarp / kAttnThreads, kKPL = kBK / kWarp;
static_assert(kRPW >= 1 && kKPL >= 1 && kRPW * (kAttnThreads / kWarp) == kRows, "S mapping");

// One KV tile as the core sees it.
struct Tile {
  const void* k = nullptr;  // key 0 of the tile
  const void* v = nullptr;
  int64_t stride = 0;  // elements between consecutive keys
  int nkeys = 0;       // keys [0, nkeys) are real; the rest are zero-filled
  int kpos0 = 0;       // position of key 0 (for the causal limit)
};

// Where the rows' results go.
struct AttnOut {
  void* out = nullptr;        // [rows][D] input dtype (final mode)
  float* lse = nullptr;       // [rows]
  float* part_o = nullptr;    // [S][rows_total][D] f32 (split mode), null = final
  float* part_lse = nullptr;  // [S][rows_total]
  int64_t rows_total = 0;
  int split = 0;
};

template <int DT, int DP>
struct AttnLayout {
  using T = typename Elem<DT>::T;
  static constexpr int ES = int(sizeof(T));
  static constexpr int QROW = DP + 4;                    // floats
  static constexpr int KROW = DP * ES + 16;              // bytes, padded (bank-conflict-free)
  static constexpr int PROW = kBK + 4;                   // floats
  static constexpr int CPRP = DP * ES / 16;              // 16-byte chunks per padded row
  static constexpr int NCH = kBK * CPRP / kAttnThreads;  // chunks per thread per matrix
  static_assert(NCH >= 1 && kBK * CPRP % kAttnThreads == 0, "tile chunking");
  static constexpr int Q_OFF = 0;
  static constexpr int K_OFF = Q_OFF + kRows * QROW * 4;
  static constexpr int V_OFF = K_OFF + kBK * KROW;
  static constexpr int P_OFF = V_OFF + kBK * KROW;
  static constexpr int STAT_OFF = P_OFF + kRows * PROW * 4;  // alpha, m, l: 3 x kRows floats
  static constexpr int ROW_OFF = STAT_OFF + 3 * kRows * 4;   // row_id (int64) then row_lim (int)
  static constexpr int BYTES = ROW_OFF + kRows * 8 + kRows * 4;
};

// Shared row descriptors, filled by the op's kernel before attend(): row_id = t*H + h
// (index of the q/out row and of lse), -1 for an unused row; row_lim = the last key
// position the row may see (causal and kv_len limit), -1 for none.
template <class L>
__device__ __forceinline__ int64_t* attn_row_id(char* smem) {
  return reinterpret_cast<int64_t*>(smem + L::ROW_OFF);
}
template <class L>
__device__ __forceinline__ int* attn_row_lim(char* smem) {
  return reinterpret_cast<int*>(smem + L::ROW_OFF + kRows * 8);
}

// Runs the rows against the tiles src.tile(i, tile) for i in [0, ntiles) (tiles it
// rejects are skipped; the decision must be the same in every thread). `q` is
// [rows][D] in DT. Call with every thread of the block; row descriptors set and synced.
template <int DT, int DP, class Src>
__device__ void attend(char* smem, const void* q_ptr, int D, float scale_log2, const Src& src, int ntiles,
                       const AttnOut& o) {
  using L = AttnLayout<DT, DP>;
  using T = typename L::T;
  float* qs = reinterpret_cast<float*>(smem + L::Q_OFF);
  char* ks = smem + L::K_OFF;
  char* vs = smem + L::V_OFF;
  float* ps = reinterpret_cast<float*>(smem + L::P_OFF);
  float* alpha_s = reinterpret_cast<float*>(smem + L::STAT_OFF);
  float* m_s = alpha_s + kRows;
  float* l_s = m_s + kRows;
  const int64_t* row_id = attn_row_id<L>(smem);
  const int* row_lim = attn_row_lim<L>(smem);
  const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
  const T* q = static_cast<const T*>(q_ptr);
  const float ninf = -FLT_MAX * 2.0f;

  // q rows, pre-scaled, zero-padded to DP.
  for (int i = tid; i < kRows * DP; i += kAttnThreads) {
    const int r = i / DP, d = i % DP;
    const int64_t id = row_id[r];
    qs[r * L::QROW + d] = (id >= 0 && d < D) ? Elem<DT>::load(q[id * D + d]) * scale_log2 : 0.0f;
  }
  int max_lim = -1;
#pragma unroll
  for (int r = 0; r < kRows; ++r) max_lim = max(max_lim, row_lim[r]);

  // S-step ownership: rows r0 .. r0 + kRPW - 1; keys lane + kWarp * kk.
  const int r0 = kRPW * warp;
  float m_run[kRPW], l_run[kRPW];
  int lim_r[kRPW];
#pragma unroll
  for (int rr = 0; rr < kRPW; ++rr) {
    m_run[rr] = ninf;
    l_run[rr] = 0.0f;
    lim_r[rr] = row_lim[r0 + rr];
  }
  // PV ownership: row pr, dims [pd, pd + DPT).
  constexpr int DPT = DP / 16;
  const int pr = tid / 16, pd = (tid % 16) * DPT;
  float acc[DPT];
#pragma unroll
  for (int e = 0; e < DPT; ++e) acc[e] = 0.0f;

  const int cprd = D * L::ES / 16;  // real 16-byte chunks per row
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
      const int64_t off = (j * t.stride) * L::ES + ch * 16;  // bytes
      kreg[c] = ok ? ldg16(static_cast<const char*>(t.k) + off) : make_uint4(0, 0, 0, 0);
      vreg[c] = ok ? ldg16(static_cast<const char*>(t.v) + off) : make_uint4(0, 0, 0, 0);
    }
  };

  int i = find(0, cur);
  if (i < ntiles) prefetch(cur);
  while (i < ntiles) {
    __syncthreads();  // the previous tile's readers are done
#pragma unroll
    for (int c = 0; c < L::NCH; ++c) {
      const int lin = tid + c * kAttnThreads, j = lin / L::CPRP, ch = lin % L::CPRP;
      *reinterpret_cast<uint4*>(ks + j * L::KROW + ch * 16) = kreg[c];
      *reinterpret_cast<uint4*>(vs + j * L::KROW + ch * 16) = vreg[c];
    }
    __syncthreads();
    const int ni = find(i + 1, nxt);
    if (ni < ntiles) prefetch(nxt);  // in flight during this tile's math

    // ---- S = Q K^T for this warp's rows and this lane's keys ----
    {
      constexpr int E = 16 / L::ES;
      float sc[kRPW][kKPL];
#pragma unroll
      for (int rr = 0; rr < kRPW; ++rr)
#pragma unroll
        for (int kk = 0; kk < kKPL; ++kk) sc[rr][kk] = 0.0f;
#pragma unroll
      for (int dc = 0; dc < DP; dc += E) {
        float kf[kKPL][E];
#pragma unroll
        for (int kk = 0; kk < kKPL; ++kk)
          unpack16<DT>(*reinterpret_cast<const uint4*>(ks + (lane + kWarp * kk) * L::KROW + dc * L::ES), kf[kk]);
#pragma unroll
        for (int rr = 0; rr < kRPW; ++rr) {
          const float* qr = qs + (r0 + rr) * L::QROW + dc;
#pragma unroll
          for (int e = 0; e < E; e += 4) {
            const float4 qv = *reinterpret_cast<const float4*>(qr + e);
#pragma unroll
            for (int kk = 0; kk < kKPL; ++kk) {
              sc[rr][kk] = fmaf(qv.x, kf[kk][e], sc[rr][kk]);
              sc[rr][kk] = fmaf(qv.y, kf[kk][e + 1], sc[rr][kk]);
              sc[rr][kk] = fmaf(qv.z, kf[kk][e + 2], sc[rr][kk]);
              sc[rr][kk] = fmaf(qv.w, kf[kk][e + 3], sc[rr][kk]);
            }
          }
        }
      }
      // mask, online softmax (base 2)
#pragma unroll
      for (int rr = 0; rr < kRPW; ++rr) {
        bool vk[kKPL];
        float a[kKPL];
        float mt = ninf, bad = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kKPL; ++kk) {
          const int j = lane + kWarp * kk;
          vk[kk] = j < cur.nkeys && cur.kpos0 + j <= lim_r[rr];
          a[kk] = vk[kk] ? sc[rr][kk] : ninf;
          if (vk[kk] && nonfinite(sc[rr][kk])) bad = 1.0f;
          mt = fmaxf(mt, a[kk]);
        }
        mt = warp_max(mt);
        bad = warp_max(bad);
        const float mn = fmaxf(m_run[rr], mt);
        float alpha = 1.0f, psum = 0.0f;
        float* prow = ps + (r0 + rr) * L::PROW;
#pragma unroll
        for (int kk = 0; kk < kKPL; ++kk) {
          // Hidden keys get -0: the PV step skips them, so a NaN or Inf value the row
          // does not attend never reaches it (0 * NaN would); attended keys are >= +0.
          const float pv = (mn != ninf && vk[kk]) ? exp2f(a[kk] - mn) : -0.0f;
          psum += pv;
          prow[lane + kWarp * kk] = pv;
        }
        if (mn != ninf) alpha = m_run[rr] == ninf ? 0.0f : exp2f(m_run[rr] - mn);
        // A visible logit that is not finite makes the row NaN for good (docs/spec.md,
        // "Non-finite inputs"): l_run stays NaN through every later tile.
        l_run[rr] = bad > 0.0f ? quiet_nan() : l_run[rr] * alpha + warp_sum(psum);
        m_run[rr] = mn;
        if (lane == 0) alpha_s[r0 + rr] = alpha;
      }
    }
    __syncthreads();

    // ---- O = O * alpha + P V ----
    {
      const float al = alpha_s[pr];
#pragma unroll
      for (int e = 0; e < DPT; ++e) acc[e] *= al;
      const float* prow = ps + pr * L::PROW;
      const int jn = min(cur.nkeys, kBK);
      for (int j = 0; j < jn; j += 4) {
        const float4 p4 = *reinterpret_cast<const float4*>(prow + j);
        const float pj[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          if (__float_as_uint(pj[jj]) == 0x80000000u) continue;  // -0: a key this row does not see
          const char* vrow = vs + (j + jj) * L::KROW + pd * L::ES;
          float vf[DPT];
          if constexpr (DPT * L::ES == 16) {
            unpack16<DT>(*reinterpret_cast<const uint4*>(vrow), vf);
          } else if constexpr (DPT * L::ES == 32) {
            unpack16<DT>(*reinterpret_cast<const uint4*>(vrow), vf);
            unpack16<DT>(*reinterpret_cast<const uint4*>(vrow + 16), vf + DPT / 2);
          } else {  // 8 bytes: DP = 64 with 16-bit types
            const uint2 raw = *reinterpret_cast<const uint2*>(vrow);
            T e2[DPT];  // memcpy, not a T* into `raw`: that read breaks strict aliasing (GCC
            __builtin_memcpy(e2, &raw, sizeof(raw));  // miscompiles it; clang/HIP may)
#pragma unroll
            for (int e = 0; e < DPT; ++e) vf[e] = Elem<DT>::load(e2[e]);
          }
#pragma unroll
          for (int e = 0; e < DPT; ++e) acc[e] = fmaf(pj[jj], vf[e], acc[e]);
        }
      }
    }
    cur = nxt;
    i = ni;
  }

  // ---- finish: O / l and lse ----
  __syncthreads();
  if (lane == 0) {
#pragma unroll
    for (int rr = 0; rr < kRPW; ++rr) {
      m_s[r0 + rr] = m_run[rr];
      l_s[r0 + rr] = l_run[rr];
    }
  }
  __syncthreads();
  // A non-finite accumulated value in any of the row's 16 threads marks it as well.
  float acc_bad = 0.0f;
#pragma unroll
  for (int e = 0; e < DPT; ++e)
    if (nonfinite(acc[e])) acc_bad = 1.0f;
  acc_bad = warp_max<16>(acc_bad);
  const int64_t id = row_id[pr];
  if (id < 0) return;
  const float l = l_s[pr], m = m_s[pr];
  const bool nan_row = l != l || acc_bad > 0.0f;
  const bool empty = !(l > 0.0f);
  const float inv = nan_row ? quiet_nan() : empty ? 0.0f : 1.0f / l;
  const float lse = nan_row ? quiet_nan() : empty ? ninf : (m + log2f(l)) * 0.69314718055994531f;
  if (o.part_o != nullptr) {
    float* po = o.part_o + (int64_t{o.split} * o.rows_total + id) * D;
#pragma unroll
    for (int e = 0; e < DPT; ++e)
      if (pd + e < D) po[pd + e] = acc[e] * inv;
    if (tid % 16 == 0) o.part_lse[int64_t{o.split} * o.rows_total + id] = lse;
  } else {
    T* out = static_cast<T*>(o.out) + id * D;
#pragma unroll
    for (int e = 0; e < DPT; ++e)
      if (pd + e < D) out[pd + e] = Elem<DT>::store(acc[e] * inv);
    if (tid % 16 == 0) o.lse[id] = lse;
  }
}

// The portable core as a policy: the op kernels (attention_kernels.cuh) are templates
// over the core, so CUDA-only files can instantiate them with a tensor-core one.
struct FmaCore {
  template <int DT, int DP>
  using Layout = AttnLayout<DT, DP>;
  template <int DT, int DP, class Src>
  static __device__ __forceinline__ void run(char* smem, const void* q, int D, float scale, const Src& src, int ntiles,
                                             const AttnOut& o) {
    attend<DT, DP>(smem, q, D, scale * 1.4426950408889634f, src, ntiles, o);
  }
};

// Merges S split partials of every row in fixed split order: one warp per row.
template <int DT>
__global__ void attn_merge_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse, int S,
                                  int64_t rows, int D, typename Elem<DT>::T* __restrict__ out,
                                  float* __restrict__ lse) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarp;
  if (row >= rows) return;
  const float ninf = -FLT_MAX * 2.0f;
  float m = ninf;
  bool nan_row = false;  // a split with a non-finite row wrote NaN (docs/spec.md)
  for (int s = 0; s < S; ++s) {
    const float ls = part_lse[s * rows + row];
    nan_row = nan_row || ls != ls;
    m = fmaxf(m, ls);
  }
  if (nan_row) {
    for (int d = lane; d < D; d += kWarp) out[row * D + d] = Elem<DT>::store(quiet_nan());
    if (lane == 0) lse[row] = quiet_nan();
    return;
  }
  if (m == ninf) {
    for (int d = lane; d < D; d += kWarp) out[row * D + d] = Elem<DT>::store(0.0f);
    if (lane == 0) lse[row] = ninf;
    return;
  }
  float wsum = 0.0f;
  for (int s = 0; s < S; ++s) wsum += expf(part_lse[s * rows + row] - m);
  const float inv = 1.0f / wsum;
  for (int d = lane; d < D; d += kWarp) {
    float a = 0.0f;
    for (int s = 0; s < S; ++s) {
      const float w = expf(part_lse[s * rows + row] - m);
      a = fmaf(w, part_o[(s * rows + row) * D + d], a);
    }
    out[row * D + d] = Elem<DT>::store(a * inv);
  }
  if (lane == 0) lse[row] = m + logf(wsum);
}

}  // namespace msa::MSA_GPU_NS
