// Shared pieces of the tensor-core (mma.sync m16n8k16, bf16/f16 in, f32 accumulate) paged
// attention backward (attention_backward_mma.cu): the call's parameters, fragment loads,
// and the dot-product chain dout . v that delta and every dP tile share.
//
// The chain: dP[r][s] = dot(dout[r], v[s]) is one accumulator started at +0 and updated by
// mma16816 over the k-steps kk = 0 .. D/16 - 1 in order, with dout row r in the A operand
// (rows) and v row s in the B operand (columns); delta[r] = dot(dout[r], out[r]) is the
// same chain with out[r] as the column (delta_mma_kernel). A tensor core computes an
// output element from its A row, B column and accumulator alone, so a row whose attended
// value rows equal its out (one attended key: out = v) gets dP - delta = 0 exactly, hence
// dS = 0, dq = 0 and no dk contribution, as in the reference (docs/training.md: a row
// whose reference is all zeros must be exactly zero).
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma_layout.h"
#include "backends/cuda/kernels/common/mma_ptx.cuh"
#include "backends/cuda/kernels/portable/training_index.cuh"

namespace msa::cuda::bwd {

inline constexpr float kLog2e = 1.4426950408889634f;

// What the kernels read (host: attention_backward_mma.cu).
struct MmaGrad {
  AttendSets sets;
  const char* q = nullptr;  // [T][Hq][D] bf16/f16 (bytes)
  const char* dout = nullptr;
  const char* kc = nullptr;  // [P][Hkv][Bs][D]
  const char* vc = nullptr;
  const float* lse = nullptr;    // [T][Hq]
  const float* delta = nullptr;  // [T][Hq], delta_mma_kernel
  int Hq = 1, Hkv = 1, G = 1, D = 0;
  float scale = 1.0f, scale_log2 = 1.0f;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  // dk/dv work: the inverse index (bucket = page * Hb + head), the token prefix of its
  // sorted entries, and the items of each slab (page, KV head).
  InverseIndex inv;
  int Hb = 1;
  const int* tokpre = nullptr;    // [N + 1]: tokens of the sorted entries before position w
  const int* item_off = nullptr;  // [S + 1]: first item of slab s (S = P * Hkv)
  int S = 0;
  int chunks = 1;         // key chunks per slab
  int tpi = 1;            // tokens of a slab's entries per item
  int* ticket = nullptr;  // item counter of the persistent dk/dv blocks (zeroed per call)
  int* sem = nullptr;     // [S * chunks]: items of the slab chunk done (zeroed per call)
};

// A fragments (m16n8k16, 16 rows x 16 columns per k-step kk) of 16 rows of a [rows][D]
// 16-bit matrix, read from global memory: lane 4 g + q holds row g in a0 / a2 and row
// g + 8 in a1 / a3, columns 16 kk + 2 q, +1 (a0, a1) and 16 kk + 8 + 2 q, +1 (a2, a3), the
// lower column in the low half. row0 / row1 are rows g and g + 8 (-1: a zero row); k-steps
// at or past D / 16 are zero.
template <int DP>
__device__ __forceinline__ void load_rows_a(const char* base, int64_t row0, int64_t row1, int D, int lane,
                                            uint32_t (&a)[DP / 16][4]) {
  const int q = lane & 3, dsteps = D / 16;
  const uint32_t* r0 = reinterpret_cast<const uint32_t*>(base + (row0 >= 0 ? row0 : 0) * D * 2);
  const uint32_t* r1 = reinterpret_cast<const uint32_t*>(base + (row1 >= 0 ? row1 : 0) * D * 2);
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    const bool in = kk < dsteps;
    a[kk][0] = in && row0 >= 0 ? __ldg(r0 + 8 * kk + q) : 0u;
    a[kk][1] = in && row1 >= 0 ? __ldg(r1 + 8 * kk + q) : 0u;
    a[kk][2] = in && row0 >= 0 ? __ldg(r0 + 8 * kk + 4 + q) : 0u;
    a[kk][3] = in && row1 >= 0 ? __ldg(r1 + 8 * kk + 4 + q) : 0u;
  }
}

// ldmatrix lane address of a 16 x 16 block of 16-bit rows at `base` (ROWB bytes each),
// k-step kk: lanes 0-7 give rows 0-7 and lanes 8-15 rows 8-15 of column chunk 2 kk, lanes
// 16-31 the same of chunk 2 kk + 1. Plain (ldsm_x4): the A fragment a0..a3 of those rows.
// Transposed (ldsm_x4_t): with the rows as the k dimension, the B fragments (b0, b1) of
// columns 16 kk .. +7 (regs 0, 1) and 16 kk + 8 .. +15 (regs 2, 3).
template <int DP>
__device__ __forceinline__ uint32_t rows_addr(uint32_t base, int lane, int kk) {
  const int r = (lane & 7) + (((lane >> 3) & 1) << 3);
  return base + r * kRowBytes<DP> + ((2 * kk + (lane >> 4)) << 4);
}

// ldmatrix lane address of 16 rows at `base` as the columns (n) of a B operand, k-step kk:
// lanes 0-7 rows 0-7 of chunk 2 kk, 8-15 rows 0-7 of chunk 2 kk + 1, 16-23 rows 8-15 of
// chunk 2 kk, 24-31 rows 8-15 of chunk 2 kk + 1. Plain (ldsm_x4): b0, b1 of columns 0-7
// (regs 0, 1) and of columns 8-15 (regs 2, 3), column n holding row n (B[k][n] = row[n][k]).
template <int DP>
__device__ __forceinline__ uint32_t cols_addr(uint32_t base, int lane, int kk) {
  const int r = (lane & 7) + ((lane >> 4) << 3);
  return base + r * kRowBytes<DP> + ((2 * kk + ((lane >> 3) & 1)) << 4);
}

// acc += a x R for 16 rows R at `rows` (ROWB bytes each) as the k dimension: B[k = row]
// [n = dim] = R[row][dim] (rows_addr, transposed; per 16 dims dd, regs 0, 1 are the B
// fragment of dims 16 dd + 0..7, regs 2, 3 that of + 8..15). acc[n][e]: row g + 8 (e / 2)
// of a, dim 8 n + 2 q + e % 2 (m16n8 C layout).
template <int DT, int DP>
__device__ __forceinline__ void mma_rows(float (&acc)[DP / 8][4], const uint32_t (&a)[4], uint32_t rows, int lane,
                                         int dsteps) {
#pragma unroll
  for (int dd = 0; dd < DP / 16; ++dd) {
    if (dd < dsteps) {
      uint32_t b0, b1, b2, b3;
      ptx::ldsm_x4_t(rows_addr<DP>(rows, lane, dd), b0, b1, b2, b3);
      ptx::mma16816<DT>(acc[2 * dd], a, b0, b1);
      ptx::mma16816<DT>(acc[2 * dd + 1], a, b2, b3);
    }
  }
}

// delta[r] = dot(dout[r], out[r]) by the chain above, 16 rows per warp: C = dout[16 rows]
// x out[16 rows]^T as two n-tiles (columns = out rows 0-7 and 8-15), delta the diagonal.
// The B fragment of n-tile 0 (column n = out row n) is out's A fragment registers a0, a2
// (rows g, columns 2q.. and 8 + 2q..), that of n-tile 1 a1, a3. C layout (m16n8): c0, c1 at
// row g, columns 2q, 2q + 1; c2, c3 at row g + 8: the diagonal element of row g is c0/c1
// of n-tile 0 in the lane with q = g / 2, that of row g + 8 is c2/c3 of n-tile 1 there.
template <int DT, int DP, int kThreads>
__global__ void __launch_bounds__(kThreads)
    delta_mma_kernel(const char* dout, const char* out, int64_t rows, int D, float* delta) {
  const int lane = threadIdx.x & 31, gq = lane >> 2, qd = lane & 3, dsteps = D / 16;
  constexpr int kWarps = kThreads / 32;
  for (int64_t r0 = (int64_t{blockIdx.x} * kWarps + threadIdx.x / 32) * 16; r0 < rows;
       r0 += int64_t{gridDim.x} * kWarps * 16) {
    const int64_t ra = r0 + gq, rb = ra + 8;
    uint32_t oa[DP / 16][4], ya[DP / 16][4];
    load_rows_a<DP>(dout, ra < rows ? ra : -1, rb < rows ? rb : -1, D, lane, oa);
    load_rows_a<DP>(out, ra < rows ? ra : -1, rb < rows ? rb : -1, D, lane, ya);
    float c0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      if (kk < dsteps) {
        ptx::mma16816<DT>(c0, oa[kk], ya[kk][0], ya[kk][2]);
        ptx::mma16816<DT>(c1, oa[kk], ya[kk][1], ya[kk][3]);
      }
    }
    if (qd == (gq >> 1)) {
      if (ra < rows) delta[ra] = c0[gq & 1];
      if (rb < rows) delta[rb] = c1[2 + (gq & 1)];
    }
  }
}

// Largest index i in [lo, hi) with a[i] <= x, for a nondecreasing and a[lo] <= x: a
// 32-way search by the warp (every lane gets it). Call with the whole warp.
__device__ __forceinline__ int warp_last_le(const int* a, int lo, int hi, int x, int lane) {
  while (hi - lo > 1) {
    const int step = (hi - lo + 31) / 32;
    const int probe = lo + lane * step;
    const bool ok = probe < hi && __ldcg(a + probe) <= x;
    const unsigned m = __ballot_sync(0xffffffffu, ok);  // a prefix of the lanes, lane 0 included
    const int last = 31 - __clz(m);
    lo += last * step;
    hi = min(hi, lo + step);
  }
  return lo;
}

}  // namespace msa::cuda::bwd
