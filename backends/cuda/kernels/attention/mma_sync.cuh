// Device helpers of the decode attention kernels (attention/decode_split.cu,
// sparse_block_attention/decode_cluster.cu): one warp's share of a tile (Q K^T, online softmax, P V), over the
// inline-PTX wrappers of mma_ptx.cuh (validated page ids: checked_page, portable/seq.cuh).
// sm_80+.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/kernels/common/mma_ptx.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"

namespace msa::cuda::dec {

using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::ldsm_x4;
using ptx::ldsm_x4_t;
using ptx::pack2;
using ptx::smem_u32;

// c += a (16x16, row) * b (16x8, col), f32 accumulate; the pointer form the decode kernels
// use (c: 4 floats, a: 4 registers).
template <int DT>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  ptx::mma16816<DT>(*reinterpret_cast<float(*)[4]>(c), *reinterpret_cast<const uint32_t(*)[4]>(a), b0, b1);
}

// Four floats rounded to DT, one 8-byte store (p 8-byte aligned).
template <int DT>
__device__ __forceinline__ void store4(typename Elem<DT>::T* p, float4 v) {
  *reinterpret_cast<uint2*>(p) = make_uint2(pack2<DT>(v.x, v.y), pack2<DT>(v.z, v.w));
}

// ---- one warp's share of a decode attention tile -------------------------------------------
// Rows: the 16 query rows of the mma M dimension (row gq = lane / 4 and gq + 8). Keys: the
// warp's 16 keys kb..kb+15 of a tile whose K and V rows (ROWB = 2 DP bytes each) sit in
// shared memory with 16-byte chunk c of row r at chunk c ^ (r & 7) (ldmatrix without bank
// conflicts). dsteps = D / 16 <= DP / 16 k-steps are used (the rest is padding).

// A fragments of the 16 q rows (same layout as K) at shared address qbase.
template <int DP>
__device__ __forceinline__ void load_q_frags(uint32_t qbase, int lane, int dsteps, uint32_t (&qa)[DP / 16][4]) {
  const int r = (lane & 7) + (((lane >> 3) & 1) << 3);
  const uint32_t qrow = qbase + r * (DP * 2);
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    const int ch = 2 * kk + (lane >> 4);
    if (kk < dsteps)
      ldsm_x4(qrow + ((ch ^ (r & 7)) << 4), qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3]);
    else
      qa[kk][0] = qa[kk][1] = qa[kk][2] = qa[kk][3] = 0u;
  }
}

// sacc = Q K^T for the warp's keys: sacc[n][e] is row gq + 8 (e / 2), key kb + 8 n + 2 (lane % 4) + e % 2.
// qf(kk, a) yields the A fragments of q for k-step kk.
// Byte offset of 16-byte chunk ch of row r in a K or V tile of DP columns: rows of DP * 2
// bytes, chunk ch at ch ^ r % 8 (the cp.async kernels' swizzle), so 8 consecutive rows of
// one chunk hit 8 distinct bank groups.
template <int DP>
__device__ __forceinline__ uint32_t tile_chunk(int r, int ch) {
  return static_cast<uint32_t>(r * (DP * 2) + ((ch ^ (r & 7)) << 4));
}

// With q's fragments held in registers (load_q_frags).
template <int DT, int DP>
__device__ __forceinline__ void warp_qk(const uint32_t (&qa)[DP / 16][4], uint32_t kbuf, int kb, int lane, int dsteps,
                                        float (&sacc)[2][4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) sacc[n][0] = sacc[n][1] = sacc[n][2] = sacc[n][3] = 0.0f;
  const int key = kb + (lane & 7) + ((lane >> 4) << 3);
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    if (kk < dsteps) {
      const int ch = 2 * kk + ((lane >> 3) & 1);
      uint32_t b0, b1, b2, b3;
      ldsm_x4(kbuf + tile_chunk<DP>(key, ch), b0, b1, b2, b3);
      mma16816<DT>(sacc[0], qa[kk], b0, b1);
      mma16816<DT>(sacc[1], qa[kk], b2, b3);
    }
  }
}

// Online softmax (base 2) over the warp's 16 keys: ok(key within the warp's 16, row half
// h) says whether the key is visible to rows gq + 8 h. Updates the running max and sum,
// rescales o, and returns P (rounded to DT) as the A fragments of P V.
template <int DT, int DP, class Ok>
__device__ __forceinline__ void online_softmax(float (&sacc)[2][4], Ok ok, float scale_log2, float (&m_run)[2],
                                               float (&l_run)[2], float (&o)[DP / 8][4], uint32_t (&pa)[4], int lane) {
  const float ninf = __int_as_float(0xff800000u);
  const int qd = lane & 3;
  float mt[2] = {ninf, ninf};
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      // A visible -inf logit becomes NaN: with NaN and +inf ones (exp2(inf - inf)) it
      // turns l_run into NaN, which marks the row (docs/spec.md, "Non-finite inputs").
      const float x = sacc[n][e] * scale_log2;
      const float v = ok(8 * n + 2 * qd + (e & 1), e >> 1) ? (x == ninf ? quiet_nan() : x) : ninf;
      sacc[n][e] = v;
      mt[e >> 1] = fmaxf(mt[e >> 1], v);
    }
  float alpha[2];
  bool rescale = false;  // O is still zero while m_run is -inf: no rescale needed
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], 1));
    mt[h] = fmaxf(mt[h], __shfl_xor_sync(0xffffffffu, mt[h], 2));
    const float mn = fmaxf(m_run[h], mt[h]);
    alpha[h] = mn == ninf ? 1.0f : exp2f(m_run[h] - mn);
    rescale = rescale || (alpha[h] != 1.0f && m_run[h] != ninf);
    m_run[h] = mn;
  }
  float ps[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float v = sacc[n][e];
      const float pv = v == ninf ? 0.0f : exp2f(v - m_run[e >> 1]);
      sacc[n][e] = pv;
      ps[e >> 1] += pv;
    }
  // A NaN l_run stays NaN through every later tile and merge.
  l_run[0] = l_run[0] * alpha[0] + ps[0];
  l_run[1] = l_run[1] * alpha[1] + ps[1];
  if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
  }
  pa[0] = pack2<DT>(sacc[0][0], sacc[0][1]);
  pa[1] = pack2<DT>(sacc[0][2], sacc[0][3]);
  pa[2] = pack2<DT>(sacc[1][0], sacc[1][1]);
  pa[3] = pack2<DT>(sacc[1][2], sacc[1][3]);
}

// o += P V for the warp's keys: o[n][e] is row gq + 8 (e / 2), dim 8 n + 2 (lane % 4) + e % 2.
template <int DT, int DP>
__device__ __forceinline__ void warp_pv(const uint32_t (&pa)[4], uint32_t vbuf, int kb, int lane, int dsteps,
                                        float (&o)[DP / 8][4]) {
  const int key = kb + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
  for (int dp = 0; dp < DP / 16; ++dp) {
    if (dp < dsteps) {
      const int ch = 2 * dp + (lane >> 4);
      uint32_t v0, v1, v2, v3;
      ldsm_x4_t(vbuf + tile_chunk<DP>(key, ch), v0, v1, v2, v3);
      mma16816<DT>(o[2 * dp], pa, v0, v1);
      mma16816<DT>(o[2 * dp + 1], pa, v2, v3);
    }
  }
}

// ---- combining the W warps of a thread block (fixed order) -------------------------------
// Publishes the warp's running max and sum (summed over the lane quad) of rows gq, gq + 8.
__device__ __forceinline__ void publish_stats(const float (&m_run)[2], float (&l_run)[2], float* s_m_warp,
                                              float* s_l_warp, int lane) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 1);
    l_run[h] += __shfl_xor_sync(0xffffffffu, l_run[h], 2);
  }
  if ((lane & 3) == 0) {
    const int gq = lane >> 2;
    s_m_warp[gq] = m_run[0];
    s_m_warp[gq + 8] = m_run[1];
    s_l_warp[gq] = l_run[0];
    s_l_warp[gq + 8] = l_run[1];
  }
}
// Factors exp2(m - M) that bring this warp's rows gq, gq + 8 to the max M over the warps
// (0 for a row the warp never saw).
template <int W>
__device__ __forceinline__ void warp_factors(const float (*s_m)[16], const float (&m_run)[2], int lane, float (&f)[2]) {
  const float ninf = __int_as_float(0xff800000u);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float M = ninf;
#pragma unroll
    for (int w = 0; w < W; ++w) M = fmaxf(M, s_m[w][(lane >> 2) + 8 * h]);
    f[h] = m_run[h] == ninf ? 0.0f : exp2f(m_run[h] - M);
  }
}
// Row r's max M over the warps and its sum l at that max (NaN when a warp's sum is NaN).
template <int W>
__device__ __forceinline__ void merged_stats(const float (*s_m)[16], const float (*s_l)[16], int r, float& M,
                                             float& l) {
  const float ninf = __int_as_float(0xff800000u);
  M = ninf;
#pragma unroll
  for (int w = 0; w < W; ++w) M = fmaxf(M, s_m[w][r]);
  l = 0.0f;
  bool nan = false;  // a warp saw a non-finite logit: the row is NaN (docs/spec.md)
#pragma unroll
  for (int w = 0; w < W; ++w) {
    nan = nan || s_l[w][r] != s_l[w][r];
    if (s_m[w][r] != ninf) l += s_l[w][r] * exp2f(s_m[w][r] - M);
  }
  if (nan) l = quiet_nan();
}

}  // namespace msa::cuda::dec
