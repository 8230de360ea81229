// Shared pieces of the tensor-core indexer_kl (indexer_kl_mma.cu): the call's parameters
// and the per-tile math both kernels run on mma.sync m16n8k16 fragments (bf16/f16 in, f32
// accumulate).
//
// A tile is 16 rows: the query heads of a token's group (G of them, a power of two up to
// 16), 16 / G tokens, row r = token r / G, head r % G. Per 16 keys:
//  - the target's scores S = Q K^T (A: the rows' q, B: the keys), P = exp(scale S - lse)
//    per row (0 past the row's causal limit or where lse is -inf), and its column sums
//    over each token's G rows (group_col_sums): the target p = sum / group size;
//  - the student's logits by the same fragment layout: the A operand holds row r the qi
//    row of token r / G (every row of a token the same), so a logit sits in the lane and
//    register of the P element of that token and key, and the logit gradient
//    dkl * scale_i * (u - p) is formed in registers (kl_coefs). Only a token's first row
//    (r % G == 0) keeps its gradient, so the gradient products sum each token once.
// A logit is one mma chain of the qi row and the ki row (k-steps in order, from +0), so it
// is bitwise the same in both kernels and both passes: a set of one slot gets u = 1
// exactly. Its target, whose lse the caller computed over that slot alone, is formed in
// f64 (lone_target), so it is exactly 1 where cpu-ref's is: kl = 0 and zero gradients.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma.cuh"
#include "backends/cuda/kernels/indexer_kl/mma_layout.h"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::cuda::klmma {

using bwd::kLog2e;
using bwd::kRowBytes;

// What the kernels read (host: indexer_kl_mma.cu).
struct KlMma {
  AttendSets sets;
  const char* q = nullptr;     // [T][Hq][D] 16-bit (bytes)
  const char* kc = nullptr;    // [P][Hkv][Bs][D]
  const char* qi = nullptr;    // [T][Hs][Di] bf16
  const char* ki = nullptr;    // [P][Bs][Di] bf16
  const float* lse = nullptr;  // [T][Hq]
  const float* dkl = nullptr;  // [T][Hs], null: all ones
  int Hq = 1, Hkv = 1, G = 1, lg2G = 0, D = 0, Hs = 1, Di = 0;
  bool shared = false;  // one selection head over all query heads (Hkv = 1 here)
  float scale = 1.0f, scale_log2 = 1.0f, scale_i = 1.0f, inv_nh = 1.0f;
  float* kl = nullptr;
  float* dqi = nullptr;
  float* dki = nullptr;
  // Per (token, selection head), from the rows kernel: the student's logsumexp and, for a
  // set of one slot, its target (-1 otherwise).
  float2* stat = nullptr;
  // dki work: the inverse index (bucket = page * Hb + selection head, or the page when
  // Hb = 1), the token prefix of its sorted entries, and the items of each list (page,
  // selection head g) = S lists, a page's lists in g order forming its chain.
  InverseIndex inv;
  int Hb = 1;
  const int* tokpre = nullptr;    // [N + 1]
  const int* item_off = nullptr;  // [S + 1]: first item of list s (s = page * Hs + g)
  int S = 0;
  int chunks = 1;         // key chunks per page
  int tpi = 1;            // tokens of a list's entries per item
  int* ticket = nullptr;  // item counter of the persistent dki blocks (zeroed per call)
  int* sem = nullptr;     // [P * chunks]: items of the page chunk done (zeroed per call)
};

// Sums each element of p[n][e] (rows gq + 8 (e / 2), the m16n8 C layout) over the G rows
// of its token: across the lanes whose gq differ in the bits below G (xor), and for G = 16
// also over the two row halves. Every lane ends with its rows' token sums. Warp-uniform G.
__device__ __forceinline__ void group_col_sums(float (&p)[2][4], int G) {
  if (G == 16) {
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float a = p[n][0] + p[n][2], b = p[n][1] + p[n][3];
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, off);
        b += __shfl_xor_sync(0xffffffffu, b, off);
      }
      p[n][0] = p[n][2] = a;
      p[n][1] = p[n][3] = b;
    }
    return;
  }
  for (int off = 4; off < 4 * G; off <<= 1)
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) p[n][e] += __shfl_xor_sync(0xffffffffu, p[n][e], off);
}

// The rows of a token's tile share row (r / G) G's data: ldmatrix lane address of a
// 16 x 16 block as rows_addr (attention_backward_mma.cuh) with row r read from row
// r & gmask (gmask = -G).
template <int DP>
__device__ __forceinline__ uint32_t rep_rows_addr(uint32_t base, int lane, int kk, int gmask) {
  const int r = ((lane & 7) + (((lane >> 3) & 1) << 3)) & gmask;
  return base + r * kRowBytes<DP> + ((2 * kk + (lane >> 4)) << 4);
}

// acc += a x R as bwd::mma_rows (bf16), R's row r read from row r & gmask.
template <int DP>
__device__ __forceinline__ void mma_rep_rows(float (&acc)[DP / 8][4], const uint32_t (&a)[4], uint32_t rows, int lane,
                                             int dsteps, int gmask) {
#pragma unroll
  for (int dd = 0; dd < DP / 16; ++dd) {
    if (dd < dsteps) {
      uint32_t b0, b1, b2, b3;
      ptx::ldsm_x4_t(rep_rows_addr<DP>(rows, lane, dd, gmask), b0, b1, b2, b3);
      ptx::mma16816<kBF16>(acc[2 * dd], a, b0, b1);
      ptx::mma16816<kBF16>(acc[2 * dd + 1], a, b2, b3);
    }
  }
}

// One lane's rows of a tile (h = 0, 1: row gq + 8 h) as kl_coefs reads them.
struct CoefRows {
  int lim[2];      // keys j < lim[h] of the tile are the token's (its causal limit)
  bool lead[2];    // the token's first row (keeps the gradient), a token that exists
  float lse_u[2];  // the student's logsumexp
  float lone[2];   // the target of a set of one slot, or -1
  float w[2];      // dkl * scale_i
};

// From the column sums ps (the target's sums, group_col_sums) and the raw student logits
// lg of one 16-key tile (the m16n8 C layout, keys j0 + 8 n + 2 qd + e % 2): the logit
// gradients w (u - p) of the lead rows packed as the A fragment (rows x keys, bf16) of a
// product over the keys, and (kKl) each lead row's kl terms p (log p - log u) added to
// kl[h]. Masked elements are 0, whatever the discarded values held.
template <bool kKl>
__device__ __forceinline__ void kl_coefs(const float (&ps)[2][4], const float (&lg)[2][4], int j0, int qd,
                                         const CoefRows& r, float inv_nh, float scale_i, float (&kl)[2],
                                         uint32_t (&ca)[4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    float c[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e >> 1, j = j0 + 8 * n + 2 * qd + (e & 1);
      c[e] = 0.0f;
      if (r.lead[h] && j < r.lim[h]) {
        // __fmul_rn: the logit rounds as in pass 1 of the rows kernel (no contraction).
        const float lu = __fmul_rn(lg[n][e], scale_i) - r.lse_u[h];
        const float u = ptx::ex2(lu * kLog2e);
        const float pt = r.lone[h] >= 0.0f ? r.lone[h] : ps[n][e] * inv_nh;
        c[e] = r.w[h] * (u - pt);
        if constexpr (kKl) {
          if (pt != 0.0f) kl[h] += pt * (logf(pt) - lu);  // 0 log 0 = 0
        }
      }
    }
    ca[2 * n] = ptx::pack2<kBF16>(c[0], c[1]);
    ca[2 * n + 1] = ptx::pack2<kBF16>(c[2], c[3]);
  }
}

// The target of token t's set of one slot (slot 0 of `page`) in f64 as cpu-ref forms it:
// per head of the group (KV head kvh) the dot product in order, exp of the f64 exponent
// (expf of it: exactly 1 where it is 0), the mean in f64; heads whose lse is -inf add 0.
// Call with the whole warp (lane i < G takes head i); every lane gets the result.
template <int DT>
__device__ __forceinline__ float lone_target(const KlMma& p, int64_t t, int kvh, int64_t page, int lane) {
  double term = 0.0;
  if (lane < p.G) {
    const int h = kvh * p.G + lane;
    const float l = p.lse[t * p.Hq + h];
    if (l != __int_as_float(0xff800000u)) {
      const auto* qr = reinterpret_cast<const uint16_t*>(p.q) + (t * p.Hq + h) * p.D;
      const auto* kr = reinterpret_cast<const uint16_t*>(p.kc) + (page * p.Hkv + kvh) * p.sets.bt.Bs * int64_t{p.D};
      double dot = 0.0;
      for (int d = 0; d < p.D; ++d)
        dot += static_cast<double>(Elem<DT>::load(qr[d])) * static_cast<double>(Elem<DT>::load(kr[d]));
      term = static_cast<double>(expf(static_cast<float>(static_cast<double>(p.scale) * dot - static_cast<double>(l))));
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) term += __shfl_xor_sync(0xffffffffu, term, off);
  return static_cast<float>(term / p.G);
}

}  // namespace msa::cuda::klmma
