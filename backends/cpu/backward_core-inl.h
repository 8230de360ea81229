// Per-target core of the attention backward kernels (dense, sparse, patch): one key tile
// (up to a block of keys of one head) against batches of query rows, FlashAttention-2
// style: S = Q K^T, P, dP = dO V^T and dS are formed once per (row, key) and give
// dV += P^T dO and dK += dS^T Q for the tile; dS stays in the tile's scratch so the
// caller forms dq from it (dq = scale * dS K).
//
// Layout: keys live in vector lanes. The tile's keys and values are stored transposed,
// kt[d][j], so the forward's QkTile (attention_core-inl.h) with the query rows in the
// role of its keys gives s[r][j] for a whole vector of keys per FMA, and its PvTile with
// the rows as the reduction index accumulates dvt[d][j] / dkt[d][j]. Every sum runs in
// a fixed order (rows in the order given, then d), so results depend only on the inputs.
#if defined(MSA_CPU_BACKWARD_CORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MSA_CPU_BACKWARD_CORE_INL_H_
#undef MSA_CPU_BACKWARD_CORE_INL_H_
#else
#define MSA_CPU_BACKWARD_CORE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "backends/cpu/attention_core-inl.h"
#include "backends/cpu/scratch.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// Query rows per batch: enough to amortise a tile's setup, few enough that s / dp of a
// batch (rows x keys) stay in L1/L2 next to the tile for D up to 256.
inline constexpr size_t kBackwardRows = 64;

// One key tile: nk keys of head dim D, padded to kpad (whole vectors).
struct BackwardTile {
  size_t D = 0, nk = 0, kpad = 0;
  float* kt = nullptr;   // [D][kpad] keys, transposed
  float* vt = nullptr;   // [D][kpad] values, transposed
  float* dkt = nullptr;  // [D][kpad] sum dS^T (scale q)
  float* dvt = nullptr;  // [D][kpad] sum P^T dO
  float* s = nullptr;    // [kBackwardRows][kpad]: P of the last batch
  float* dp = nullptr;   // [kBackwardRows][kpad]: dS of the last batch
};

// Keys per tile padded to whole vectors.
HWY_INLINE size_t PadKeys(size_t nk) {
  const size_t N = hn::Lanes(DF());
  return (nk + N - 1) / N * N;
}

// dst[d * kpad + j] = src[j * ld + d] for j < nk, d < D; lanes nk .. kpad are 0.
HWY_INLINE void TransposeRows(const float* HWY_RESTRICT src, size_t ld, size_t nk, size_t D, float* HWY_RESTRICT dst,
                              size_t kpad) {
  for (size_t d = 0; d < D; ++d) std::fill(dst + d * kpad + nk, dst + (d + 1) * kpad, 0.0f);
  for (size_t j = 0; j < nk; ++j)
    for (size_t d = 0; d < D; ++d) dst[d * kpad + j] = src[j * ld + d];
}

// s[r][j] = sum_d rows[r][d] * kt[d][j] for r < n and the key vectors below PadKeys(hi)
// (kt: [D][kpad] transposed keys; rows: [n][D]).
HWY_INLINE void ScoreRows(const float* HWY_RESTRICT kt, size_t kpad, const float* HWY_RESTRICT rows, size_t n, size_t D,
                          size_t hi, float* HWY_RESTRICT s) {
  const size_t N = hn::Lanes(DF());
  for (size_t j0 = 0; j0 < hi; j0 += kTileVecs * N) {
    switch (std::min<size_t>(kTileVecs, (PadKeys(hi) - j0) / N)) {
      case 1:
        QkTile<1>(kt + j0, kpad, rows, n, D, s + j0, kpad);
        break;
      case 2:
        QkTile<2>(kt + j0, kpad, rows, n, D, s + j0, kpad);
        break;
      case 3:
        QkTile<3>(kt + j0, kpad, rows, n, D, s + j0, kpad);
        break;
      default:
        QkTile<4>(kt + j0, kpad, rows, n, D, s + j0, kpad);
        break;
    }
  }
}

// o[d][j] += sum_{r < n} w[r][j] * rows[r][d] for the key vectors below PadKeys(hi)
// (w: [n][kpad]; rows: [n][D]; o: [D][kpad]), rows summed in order.
HWY_INLINE void AccumulateRowsT(const float* HWY_RESTRICT w, size_t kpad, const float* HWY_RESTRICT rows, size_t n,
                                size_t D, size_t hi, float* HWY_RESTRICT o) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF one[kTileVecs];
  for (int v = 0; v < kTileVecs; ++v) one[v] = hn::Set(df, 1.0f);
  for (size_t j0 = 0; j0 < hi; j0 += kTileVecs * N) {
    switch (std::min<size_t>(kTileVecs, (PadKeys(hi) - j0) / N)) {
      case 1:
        PvTile<1>(w + j0, kpad, rows, D, n, one, o + j0, kpad);
        break;
      case 2:
        PvTile<2>(w + j0, kpad, rows, D, n, one, o + j0, kpad);
        break;
      case 3:
        PvTile<3>(w + j0, kpad, rows, D, n, one, o + j0, kpad);
        break;
      default:
        PvTile<4>(w + j0, kpad, rows, D, n, one, o + j0, kpad);
        break;
    }
  }
}

// Points t at scratch (5 * D * kpad + 2 * kBackwardRows * kpad floats at buf), transposes
// k and v (rows j at k + j * ld, j < nk) into it and zeroes the accumulators.
HWY_INLINE void LoadKeyTile(BackwardTile& t, size_t D, size_t nk, const float* HWY_RESTRICT k,
                            const float* HWY_RESTRICT v, size_t ld, float* HWY_RESTRICT buf) {
  t.D = D, t.nk = nk, t.kpad = PadKeys(nk);
  const size_t n = D * t.kpad;
  t.kt = buf, t.vt = buf + n, t.dkt = buf + 2 * n, t.dvt = buf + 3 * n;
  t.s = buf + 4 * n, t.dp = t.s + kBackwardRows * t.kpad;
  std::fill(buf + 2 * n, buf + 4 * n, 0.0f);
  TransposeRows(k, ld, nk, D, t.kt, t.kpad);
  TransposeRows(v, ld, nk, D, t.vt, t.kpad);
}

// Scratch floats LoadKeyTile needs.
HWY_INLINE size_t KeyTileFloats(size_t D, size_t nk) { return 4 * D * PadKeys(nk) + 2 * kBackwardRows * PadKeys(nk); }

// One batch of rows (<= kBackwardRows) against the tile. qs [rows][D]: scale * q;
// go [rows][D]: dout; lse, delta [rows]; nvis[r]: the row sees keys [0, nvis[r]) of the
// tile (0 for a row that contributes nothing). Leaves P in t.s and dS in t.dp (0 past
// nvis within the key vectors some row sees; beyond them unset), adds P^T dO to dvt and dS^T qs to dkt.
HWY_INLINE void BackwardBatch(BackwardTile& t, const float* HWY_RESTRICT qs, const float* HWY_RESTRICT go, size_t rows,
                              const float* HWY_RESTRICT lse, const float* HWY_RESTRICT delta,
                              const int32_t* HWY_RESTRICT nvis) {
  const DF df;
  const size_t N = hn::Lanes(df), ld = t.kpad;
  const size_t hi = static_cast<size_t>(*std::max_element(nvis, nvis + rows));
  if (hi == 0) return;
  ScoreRows(t.kt, ld, qs, rows, t.D, hi, t.s);
  ScoreRows(t.vt, ld, go, rows, t.D, hi, t.dp);
  for (size_t r = 0; r < rows; ++r) {
    const VF l = hn::Set(df, lse[r]), dl = hn::Set(df, delta[r]);
    for (size_t j = 0; j < hi; j += N) {
      const int64_t left = static_cast<int64_t>(nvis[r]) - static_cast<int64_t>(j);
      const auto vis = hn::FirstN(df, static_cast<size_t>(std::clamp<int64_t>(left, 0, static_cast<int64_t>(N))));
      float* sp = t.s + r * ld + j;
      float* dsp = t.dp + r * ld + j;
      const VF p = hn::IfThenElseZero(vis, hn::Exp(df, hn::Sub(hn::LoadU(df, sp), l)));
      hn::StoreU(p, df, sp);
      hn::StoreU(hn::IfThenElseZero(vis, hn::Mul(p, hn::Sub(hn::LoadU(df, dsp), dl))), df, dsp);
    }
  }
  AccumulateRowsT(t.s, ld, go, rows, t.D, hi, t.dvt);
  AccumulateRowsT(t.dp, ld, qs, rows, t.D, hi, t.dkt);
}

// dst[0..D) += sum_{j < n} w[j] * k[j * ldk + 0..D), in an order fixed by n and D.
HWY_INLINE void AddWeightedRows(const float* HWY_RESTRICT w, size_t n, const float* HWY_RESTRICT k, size_t ldk,
                                size_t D, float* HWY_RESTRICT dst) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t d = 0;
  for (; d + 4 * N <= D; d += 4 * N) {
    VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    for (size_t j = 0; j < n; ++j) {
      const VF x = hn::Set(df, w[j]);
      const float* kr = k + j * ldk + d;
      a0 = hn::MulAdd(x, hn::LoadU(df, kr), a0);
      a1 = hn::MulAdd(x, hn::LoadU(df, kr + N), a1);
      a2 = hn::MulAdd(x, hn::LoadU(df, kr + 2 * N), a2);
      a3 = hn::MulAdd(x, hn::LoadU(df, kr + 3 * N), a3);
    }
    hn::StoreU(hn::Add(hn::LoadU(df, dst + d), a0), df, dst + d);
    hn::StoreU(hn::Add(hn::LoadU(df, dst + d + N), a1), df, dst + d + N);
    hn::StoreU(hn::Add(hn::LoadU(df, dst + d + 2 * N), a2), df, dst + d + 2 * N);
    hn::StoreU(hn::Add(hn::LoadU(df, dst + d + 3 * N), a3), df, dst + d + 3 * N);
  }
  // Fewer than 4 vectors left (small D): four chains over j (j mod 4) hide the FMA latency.
  for (; d + N <= D; d += N) {
    VF a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
      const float* kr = k + j * ldk + d;
      a0 = hn::MulAdd(hn::Set(df, w[j]), hn::LoadU(df, kr), a0);
      a1 = hn::MulAdd(hn::Set(df, w[j + 1]), hn::LoadU(df, kr + ldk), a1);
      a2 = hn::MulAdd(hn::Set(df, w[j + 2]), hn::LoadU(df, kr + 2 * ldk), a2);
      a3 = hn::MulAdd(hn::Set(df, w[j + 3]), hn::LoadU(df, kr + 3 * ldk), a3);
    }
    for (; j < n; ++j) a0 = hn::MulAdd(hn::Set(df, w[j]), hn::LoadU(df, k + j * ldk + d), a0);
    const VF a = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
    hn::StoreU(hn::Add(hn::LoadU(df, dst + d), a), df, dst + d);
  }
  for (; d < D; ++d) {
    float a = 0.0f;
    for (size_t j = 0; j < n; ++j) a += w[j] * k[j * ldk + d];
    dst[d] += a;
  }
}

// out[r][0..D) = sum_{j < kpad} w[r][j] * k[j][0..D) for r < n: the dq products of a batch
// (w: dS rows [n][kpad], zeroed here from lane `from` on; k: the tile's keys row-major
// [kpad][D], rows past its keys zero). QkTile with the key rows in the role of its
// transposed queries (d in vector lanes), n rows register-blocked per key loaded.
HWY_INLINE void RowsTimesKeys(float* HWY_RESTRICT w, size_t kpad, size_t n, size_t from, const float* HWY_RESTRICT k,
                              size_t D, float* HWY_RESTRICT out) {
  const size_t N = hn::Lanes(DF());
  for (size_t r = 0; r < n; ++r) std::fill(w + r * kpad + from, w + (r + 1) * kpad, 0.0f);
  for (size_t d0 = 0; d0 + N <= D; d0 += kTileVecs * N) {
    switch (std::min<size_t>(kTileVecs, (D - d0) / N)) {
      case 1:
        QkTile<1>(k + d0, D, w, n, kpad, out + d0, D);
        break;
      case 2:
        QkTile<2>(k + d0, D, w, n, kpad, out + d0, D);
        break;
      case 3:
        QkTile<3>(k + d0, D, w, n, kpad, out + d0, D);
        break;
      default:
        QkTile<4>(k + d0, D, w, n, kpad, out + d0, D);
        break;
    }
  }
  for (size_t d = D / N * N; d < D; ++d)
    for (size_t r = 0; r < n; ++r) {
      float a = 0.0f;
      for (size_t j = 0; j < kpad; ++j) a += w[r * kpad + j] * k[j * D + d];
      out[r * D + d] = a;
    }
}

// sum_i a[i] * b[i] as one MulAdd chain in i order, the order QkTile forms each score in:
// delta = dot(dout, out) then equals dP = dot(dout, v) bitwise when out is v (a row that
// sees one key), so that row's dS is exactly 0, as in exact arithmetic.
HWY_INLINE float ChainDot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, size_t n) {
  const hn::CappedTag<float, 1> d1;
  auto acc = hn::Zero(d1);
  for (size_t i = 0; i < n; ++i) acc = hn::MulAdd(hn::Set(d1, a[i]), hn::Set(d1, b[i]), acc);
  return hn::GetLane(acc);
}

// dst[j * ld + d] += src[d * kpad + j] for j < nk, d < D (a tile accumulator, transposed
// back to rows).
HWY_INLINE void AddTransposed(const float* HWY_RESTRICT src, size_t kpad, size_t nk, size_t D, float* HWY_RESTRICT dst,
                              size_t ld) {
  for (size_t j = 0; j < nk; ++j)
    for (size_t d = 0; d < D; ++d) dst[j * ld + d] += src[d * kpad + j];
}

// The rows of one query batch: scaled q, dout, lse (0 for an empty row), delta, keys seen.
struct RowBatch {
  float *qs, *go, *lse, *delta;
  int32_t* nvis;
  size_t rows = 0;

  RowBatch(size_t D)
      : qs(scratch_floats(1, kBackwardRows * D)),
        go(scratch_floats(2, kBackwardRows * D)),
        lse(scratch_floats(3, 3 * kBackwardRows)),
        delta(lse + kBackwardRows),
        nvis(reinterpret_cast<int32_t*>(lse + 2 * kBackwardRows)) {}

  // Appends row (q, dout: D floats); a row whose lse is -inf sees nothing.
  void add(const float* q, const float* dout, size_t D, float scale, float l, float dl, int64_t keys) {
    const bool empty = l == -std::numeric_limits<float>::infinity();
    for (size_t d = 0; d < D; ++d) qs[rows * D + d] = scale * q[d];
    std::copy(dout, dout + D, go + rows * D);
    lse[rows] = empty ? 0.0f : l;
    delta[rows] = dl;
    nvis[rows] = empty ? 0 : static_cast<int32_t>(keys);
    ++rows;
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#endif  // MSA_CPU_BACKWARD_CORE_INL_H_
