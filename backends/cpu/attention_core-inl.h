// Per-target core of every softmax-attention kernel of the backend (dense, sparse, patch):
// a group of query rows that share one key list, processed key tile by key tile with an
// online softmax (FlashAttention style), all in f32.
//
// Layout: rows live in vector lanes. The scaled queries are stored transposed,
// qt[d][r], so one key element broadcast against qt[d][r0..r0+N) feeds N rows with one
// FMA; each loaded key tile is reused by every row of the group (G heads of a token in
// decode, several tokens x G heads in prefill). The output accumulator is transposed
// too, o[d][r], so P @ V is the same broadcast-FMA pattern with V elements. Max, exp and
// the running (m, l) are per lane: no horizontal reductions anywhere.
#if defined(MSA_CPU_ATTENTION_CORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_CPU_ATTENTION_CORE_INL_H_
#undef MSA_CPU_ATTENTION_CORE_INL_H_
#else
#define MSA_CPU_ATTENTION_CORE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "backends/cpu/convert-inl.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// Row vectors per micro tile (rows = kTileVecs * Lanes).
inline constexpr int kTileVecs = 4;

// Keys per QK register panel / output dims per PV register panel, by row vectors:
// accumulators = panel * vecs, leaving room for the operands.
template <int NV>
inline constexpr int kQkPanel = kVecRegs == 32 ? (NV == 1   ? 12
                                                  : NV == 2 ? 9
                                                  : NV == 3 ? 7
                                                            : 5)
                                               : (NV == 1   ? 8
                                                  : NV == 2 ? 5
                                                  : NV == 3 ? 3
                                                            : 2);
template <int NV>
inline constexpr int kPvPanel = kVecRegs == 32 ? (NV == 1   ? 16
                                                  : NV == 2 ? 9
                                                  : NV == 3 ? 7
                                                            : 5)
                                               : (NV == 1   ? 8
                                                  : NV == 2 ? 5
                                                  : NV == 3 ? 3
                                                            : 2);

// s[jj][v*N..] = sum_d k[jj][d] * qt[d][v*N..] for jj < JR, v < NV.
template <int NV, int JR>
HWY_INLINE void QkPanel(const float* HWY_RESTRICT qt, size_t ldq, const float* HWY_RESTRICT k, size_t D,
                        float* HWY_RESTRICT s, size_t lds) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[JR][NV];
  for (int jj = 0; jj < JR; ++jj)
    for (int v = 0; v < NV; ++v) acc[jj][v] = hn::Zero(df);
  for (size_t d = 0; d < D; ++d) {
    VF q[NV];
    for (int v = 0; v < NV; ++v) q[v] = hn::LoadU(df, qt + d * ldq + v * N);
    for (int jj = 0; jj < JR; ++jj) {
      const VF kb = hn::Set(df, k[jj * D + d]);
      for (int v = 0; v < NV; ++v) acc[jj][v] = hn::MulAdd(kb, q[v], acc[jj][v]);
    }
  }
  for (int jj = 0; jj < JR; ++jj)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[jj][v], df, s + jj * lds + v * N);
}

// Scores of nk keys (k [nk][D] f32) against NV row vectors: s[j][v*N + lane].
template <int NV>
HWY_INLINE void QkTile(const float* HWY_RESTRICT qt, size_t ldq, const float* HWY_RESTRICT k, size_t nk, size_t D,
                       float* HWY_RESTRICT s, size_t lds) {
  constexpr int JR = kQkPanel<NV>;
  size_t j = 0;
  for (; j + JR <= nk; j += JR) QkPanel<NV, JR>(qt, ldq, k + j * D, D, s + j * lds, lds);
  for (; j < nk; ++j) QkPanel<NV, 1>(qt, ldq, k + j * D, D, s + j * lds, lds);
}

// o[dd][v*N..] = o * alpha[v] + sum_j p[j][v*N..] * vt[j][dd] for dd < DR.
template <int NV, int DR>
HWY_INLINE void PvPanel(const float* HWY_RESTRICT p, size_t lds, const float* HWY_RESTRICT vt, size_t D, size_t nk,
                        const VF* alpha, float* HWY_RESTRICT o, size_t ldo) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF acc[DR][NV];
  for (int dd = 0; dd < DR; ++dd)
    for (int v = 0; v < NV; ++v) acc[dd][v] = hn::Zero(df);
  for (size_t j = 0; j < nk; ++j) {
    VF pv[NV];
    for (int v = 0; v < NV; ++v) pv[v] = hn::LoadU(df, p + j * lds + v * N);
    for (int dd = 0; dd < DR; ++dd) {
      const VF vb = hn::Set(df, vt[j * D + dd]);
      for (int v = 0; v < NV; ++v) acc[dd][v] = hn::MulAdd(vb, pv[v], acc[dd][v]);
    }
  }
  for (int dd = 0; dd < DR; ++dd)
    for (int v = 0; v < NV; ++v) {
      float* dst = o + dd * ldo + v * N;
      hn::StoreU(hn::MulAdd(hn::LoadU(df, dst), alpha[v], acc[dd][v]), df, dst);
    }
}

template <int NV>
HWY_INLINE void PvTile(const float* HWY_RESTRICT p, size_t lds, const float* HWY_RESTRICT vt, size_t D, size_t nk,
                       const VF* alpha, float* HWY_RESTRICT o, size_t ldo) {
  constexpr int DR = kPvPanel<NV>;
  size_t d = 0;
  for (; d + DR <= D; d += DR) PvPanel<NV, DR>(p, lds, vt + d, D, nk, alpha, o + d * ldo, ldo);
  for (; d < D; ++d) PvPanel<NV, 1>(p, lds, vt + d, D, nk, alpha, o + d * ldo, ldo);
}

// Online-softmax step for NV row vectors: masks keys past each row's limit (when
// `mask`), turns s into probabilities exp(s - m_new) in place, updates m and l, and
// returns the rescale factor of the old accumulator per row vector in alpha.
template <int NV>
HWY_INLINE void SoftmaxStep(float* HWY_RESTRICT s, size_t lds, size_t nk, float kpos0, bool mask,
                            const float* HWY_RESTRICT lim, const float* HWY_RESTRICT vbad, float* HWY_RESTRICT m,
                            float* HWY_RESTRICT l, VF* alpha) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF neg_inf = hn::Set(df, -std::numeric_limits<float>::infinity());
  for (int v = 0; v < NV; ++v) {
    float* sv = s + v * N;
    VF mx = neg_inf;
    // Rows with a visible logit that is NaN or infinite, or a visible key whose value row
    // is not finite (vbad; docs/spec.md, "Non-finite inputs"): their running sum becomes
    // NaN below, which marks them to the end.
    auto bad = hn::FirstN(df, 0);
    if (mask) {
      const VF lv = hn::LoadU(df, lim + v * N);
      for (size_t j = 0; j < nk; ++j) {
        const VF kp = hn::Set(df, kpos0 + static_cast<float>(j));
        const auto hidden = hn::Gt(kp, lv);
        const VF raw = hn::LoadU(df, sv + j * lds);
        bad = hn::Or(bad, hn::AndNot(hidden, hn::Not(hn::IsFinite(raw))));
        if (vbad != nullptr && vbad[j] != 0.0f) bad = hn::Or(bad, hn::Not(hidden));
        const VF x = hn::IfThenElse(hidden, neg_inf, raw);
        hn::StoreU(x, df, sv + j * lds);
        mx = hn::Max(mx, x);
      }
    } else {
      for (size_t j = 0; j < nk; ++j) {
        const VF raw = hn::LoadU(df, sv + j * lds);
        bad = hn::Or(bad, hn::Not(hn::IsFinite(raw)));
        if (vbad != nullptr && vbad[j] != 0.0f) bad = hn::FirstN(df, N);
        mx = hn::Max(mx, raw);
      }
    }
    const VF m_old = hn::LoadU(df, m + v * N);
    const VF m_new = hn::Max(m_old, mx);
    // A row with nothing visible yet keeps m = -inf; use 0 so exp(-inf - 0) = 0, not NaN.
    const VF m_use = hn::IfThenElse(hn::Eq(m_new, neg_inf), hn::Zero(df), m_new);
    alpha[v] = hn::Exp(df, hn::Sub(m_old, m_use));
    VF sum0 = hn::Zero(df), sum1 = hn::Zero(df);
    size_t j = 0;
    for (; j + 2 <= nk; j += 2) {
      const VF p0 = hn::Exp(df, hn::Sub(hn::LoadU(df, sv + j * lds), m_use));
      const VF p1 = hn::Exp(df, hn::Sub(hn::LoadU(df, sv + (j + 1) * lds), m_use));
      hn::StoreU(p0, df, sv + j * lds);
      hn::StoreU(p1, df, sv + (j + 1) * lds);
      sum0 = hn::Add(sum0, p0);
      sum1 = hn::Add(sum1, p1);
    }
    if (j < nk) {
      const VF p0 = hn::Exp(df, hn::Sub(hn::LoadU(df, sv + j * lds), m_use));
      hn::StoreU(p0, df, sv + j * lds);
      sum0 = hn::Add(sum0, p0);
    }
    const VF l_old = hn::LoadU(df, l + v * N);
    const VF l_new = hn::MulAdd(l_old, alpha[v], hn::Add(sum0, sum1));
    hn::StoreU(hn::IfThenElse(bad, hn::Set(df, std::numeric_limits<float>::quiet_NaN()), l_new), df, l + v * N);
    hn::StoreU(m_new, df, m + v * N);
  }
}

// The state of one row group: R rows (padded to whole vectors, Rpad), head dim D.
struct RowGroupState {
  size_t D = 0;
  size_t rows = 0;              // real rows
  size_t rpad = 0;              // rows rounded up to whole vectors
  float* qt = nullptr;          // [D][rpad] scaled queries
  float* o = nullptr;           // [D][rpad] unnormalised output
  float* m = nullptr;           // [rpad] running max
  float* l = nullptr;           // [rpad] running sum
  float* lim = nullptr;         // [rpad] last visible key position per row (padding rows copy the last real row)
  float* s = nullptr;           // [max keys per tile][kTileVecs * N] scratch
  const float* vbad = nullptr;  // per key of the current tile: 1 when its value row was not finite (null: none)
};

// Zeroes the non-finite elements of the value tile v [nk][D] and flags their keys in
// vbad[j] (1, else 0), so rows that do not attend such a key keep a finite result while
// the rows that do are marked NaN (SoftmaxStep). Returns vbad, or null when every value
// is finite.
HWY_INLINE const float* ScrubValues(float* HWY_RESTRICT v, size_t nk, size_t D, float* HWY_RESTRICT vbad) {
  const DF df;
  const size_t N = hn::Lanes(df);
  bool any = false;
  for (size_t j = 0; j < nk; ++j) {
    float* row = v + j * D;
    auto bad = hn::FirstN(df, 0);
    size_t d = 0;
    for (; d + N <= D; d += N) bad = hn::Or(bad, hn::Not(hn::IsFinite(hn::LoadU(df, row + d))));
    bool row_bad = !hn::AllFalse(df, bad);
    for (; d < D; ++d) row_bad |= !std::isfinite(row[d]);
    vbad[j] = row_bad ? 1.0f : 0.0f;
    if (!row_bad) continue;
    any = true;
    for (size_t e = 0; e < D; ++e)
      if (!std::isfinite(row[e])) row[e] = 0.0f;
  }
  return any ? vbad : nullptr;
}

// Sets o = 0, m = -inf, l = 0.
HWY_INLINE void ResetRows(RowGroupState& g) {
  std::fill(g.o, g.o + g.D * g.rpad, 0.0f);
  std::fill(g.m, g.m + g.rpad, -std::numeric_limits<float>::infinity());
  std::fill(g.l, g.l + g.rpad, 0.0f);
}

template <int NV>
HWY_INLINE void AttendSub(RowGroupState& g, size_t r0, const float* k, const float* v, size_t nk, float kpos0,
                          bool mask) {
  const size_t N = hn::Lanes(DF());
  const size_t lds = kTileVecs * N;
  VF alpha[NV];
  QkTile<NV>(g.qt + r0, g.rpad, k, nk, g.D, g.s, lds);
  SoftmaxStep<NV>(g.s, lds, nk, kpos0, mask, g.lim + r0, g.vbad, g.m + r0, g.l + r0, alpha);
  PvTile<NV>(g.s, lds, v, g.D, nk, alpha, g.o + r0, g.rpad);
}

// Adds one key tile (k, v: [nk][D] f32; key positions kpos0 .. kpos0+nk-1) to every row.
// Rows see keys at positions <= lim[r]; row vectors that see none of the tile skip it.
HWY_INLINE void AttendTile(RowGroupState& g, const float* k, const float* v, size_t nk, float kpos0) {
  const size_t N = hn::Lanes(DF());
  const float klast = kpos0 + static_cast<float>(nk - 1);
  for (size_t r0 = 0; r0 < g.rpad; r0 += kTileVecs * N) {
    const size_t nv = std::min<size_t>(kTileVecs, (g.rpad - r0) / N);
    const float* lim = g.lim + r0;
    const float lo = *std::min_element(lim, lim + nv * N);
    const float hi = *std::max_element(lim, lim + nv * N);
    if (hi < kpos0) continue;  // no row of this sub-tile sees any key of the tile
    const bool mask = klast > lo;
    switch (nv) {
      case 1:
        AttendSub<1>(g, r0, k, v, nk, kpos0, mask);
        break;
      case 2:
        AttendSub<2>(g, r0, k, v, nk, kpos0, mask);
        break;
      case 3:
        AttendSub<3>(g, r0, k, v, nk, kpos0, mask);
        break;
      default:
        AttendSub<4>(g, r0, k, v, nk, kpos0, mask);
        break;
    }
  }
}

// Writes one finished row (docs/spec.md, "Non-finite inputs"): a NaN sum L (a visible
// logit was not finite) or a non-finite accumulated value gives NaN in every element of
// out and in lse; L == 0 (nothing visible) gives out = 0, lse = -inf; otherwise out =
// o / L and lse = m + log(L). o[d * ldo] is element d of the unnormalised row.
template <typename T>
HWY_INLINE void FinishRow(const float* o, size_t ldo, size_t D, float m, float L, T* HWY_RESTRICT out,
                          float* HWY_RESTRICT lse) {
  bool bad = std::isnan(L);
  for (size_t d = 0; d < D && !bad; ++d) bad = !std::isfinite(o[d * ldo]);
  if (bad) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t d = 0; d < D; ++d) FromF32(nan, out + d);
    *lse = nan;
    return;
  }
  const float inv = L > 0.0f ? 1.0f / L : 0.0f;
  for (size_t d = 0; d < D; ++d) FromF32(o[d * ldo] * inv, out + d);
  *lse = L > 0.0f ? m + std::log(L) : -std::numeric_limits<float>::infinity();
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#endif  // MSA_CPU_ATTENTION_CORE_INL_H_
