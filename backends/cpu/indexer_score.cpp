// indexer_score (docs/spec.md): block_score[qb][h][c] = max over the queries of query
// block qb of the pooled (max or log-sum-exp) logits scale_i * qi.ki over the valid,
// causal tokens of key block c; -inf where no token is valid.
//
// Prefill (many rows per group): rows in vector lanes, each converted key block reused
// by all rows through the broadcast-FMA panels of attention_core-inl.h. Decode (a few
// rows): dot products along Di, keys streamed once, row by row of the block.
// NVFP4 keys are decoded (codes times their group scale, exactly) into f32: the whole
// block for prefill, L1-sized runs of rows for decode; then the f32 kernels run.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/indexer_score.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/attention_core-inl.h"
#include "backends/cpu/indexer_plan.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hal/dtype.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Pools the logits of rows [r0, r0 + NV*N) over keys j < nk (s[j][lane]) into pooled[].
// Keys at positions kpos0 + j > lim[r] are excluded.
template <int NV>
HWY_INLINE void PoolLanes(const float* HWY_RESTRICT s, size_t lds, size_t nk, float kpos0,
                          const float* HWY_RESTRICT lim, bool lse, float* HWY_RESTRICT pooled) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF neg_inf = hn::Set(df, kNegInf);
  for (int v = 0; v < NV; ++v) {
    const VF lv = hn::LoadU(df, lim + v * N);
    VF mx = neg_inf;
    auto nan = hn::FirstN(df, 0);  // a visible NaN logit: the pooled value is NaN (IEEE)
    for (size_t j = 0; j < nk; ++j) {
      const VF kp = hn::Set(df, kpos0 + static_cast<float>(j));
      const auto hidden = hn::Gt(kp, lv);
      const VF raw = hn::LoadU(df, s + j * lds + v * N);
      nan = hn::Or(nan, hn::AndNot(hidden, hn::IsNaN(raw)));
      mx = hn::Max(mx, hn::IfThenElse(hidden, neg_inf, raw));
    }
    if (lse) {
      const VF m_use = hn::IfThenElse(hn::Eq(mx, neg_inf), hn::Zero(df), mx);
      VF sum = hn::Zero(df);
      for (size_t j = 0; j < nk; ++j) {
        const VF kp = hn::Set(df, kpos0 + static_cast<float>(j));
        const VF x = hn::IfThenElse(hn::Gt(kp, lv), neg_inf, hn::LoadU(df, s + j * lds + v * N));
        sum = hn::Add(sum, hn::Exp(df, hn::Sub(x, m_use)));
      }
      // sum >= 1 wherever mx is finite; rows with nothing valid stay -inf.
      mx = hn::IfThenElse(hn::Eq(mx, neg_inf), neg_inf, hn::Add(mx, hn::Log(df, sum)));
    }
    hn::StoreU(hn::IfThenElse(nan, hn::Set(df, std::numeric_limits<float>::quiet_NaN()), mx), df, pooled + v * N);
  }
}

// Pooled values of one key tile (k [nk][Di] f32) for every row of a GEMM-style group.
HWY_INLINE void ScoreTileRows(const float* qt, size_t rpad, const float* lim, const float* k, size_t nk, size_t Di,
                              float kpos0, bool lse, float* s, float* pooled) {
  const size_t N = hn::Lanes(DF());
  const size_t lds = kTileVecs * N;
  for (size_t r0 = 0; r0 < rpad; r0 += kTileVecs * N) {
    const size_t nv = std::min<size_t>(kTileVecs, (rpad - r0) / N);
    switch (nv) {
      case 1:
        QkTile<1>(qt + r0, rpad, k, nk, Di, s, lds);
        PoolLanes<1>(s, lds, nk, kpos0, lim + r0, lse, pooled + r0);
        break;
      case 2:
        QkTile<2>(qt + r0, rpad, k, nk, Di, s, lds);
        PoolLanes<2>(s, lds, nk, kpos0, lim + r0, lse, pooled + r0);
        break;
      case 3:
        QkTile<3>(qt + r0, rpad, k, nk, Di, s, lds);
        PoolLanes<3>(s, lds, nk, kpos0, lim + r0, lse, pooled + r0);
        break;
      default:
        QkTile<4>(qt + r0, rpad, k, nk, Di, s, lds);
        PoolLanes<4>(s, lds, nk, kpos0, lim + r0, lse, pooled + r0);
        break;
    }
  }
}

#if HWY_TARGET != HWY_SCALAR
// Stores the 4 lanes of v folded down from its full width (sum of the 128-bit blocks).
template <class D>
HWY_INLINE void StoreFolded(D d, hn::VFromD<D> v, float* HWY_RESTRICT out) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    StoreFolded(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)), out);
  } else {
    hn::StoreU(v, d, out);
  }
}
#endif

// out[0..4) = the lane sums of a, b, c, e: two interleave levels inside each 128-bit
// block, then the blocks are folded (a few shuffles for four sums, instead of a full
// horizontal reduction per sum).
HWY_INLINE void Sum4(VF a, VF b, VF c, VF e, float* HWY_RESTRICT out) {
  const DF df;
#if HWY_TARGET == HWY_SCALAR
  out[0] = hn::GetLane(a);
  out[1] = hn::GetLane(b);
  out[2] = hn::GetLane(c);
  out[3] = hn::GetLane(e);
#else
  const hn::Repartition<uint64_t, DF> d64;
  const VF ab = hn::Add(hn::InterleaveLower(df, a, b), hn::InterleaveUpper(df, a, b));
  const VF ce = hn::Add(hn::InterleaveLower(df, c, e), hn::InterleaveUpper(df, c, e));
  const auto ab64 = hn::BitCast(d64, ab), ce64 = hn::BitCast(d64, ce);
  const VF lo = hn::BitCast(df, hn::InterleaveLower(d64, ab64, ce64));
  const VF hi = hn::BitCast(df, hn::InterleaveUpper(d64, ab64, ce64));
  StoreFolded(df, hn::Add(lo, hi), out);
#endif
}

// Logits of NR <= 4 rows (q [NR][Di] f32, scaled) against keys j < nk of one block, two
// keys at a time for independent FMA chains: logit[rr][j].
template <int NR, typename T>
HWY_INLINE void DotLogits(const float* HWY_RESTRICT q, const T* HWY_RESTRICT k, size_t nk, size_t Di,
                          const float* HWY_RESTRICT kscale, float* HWY_RESTRICT logit, size_t ldl) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t dv = Di / N * N;
  for (size_t j = 0; j < nk; j += 2) {
    const bool two = j + 1 < nk;
    const T* k0 = k + j * Di;
    const T* k1 = two ? k0 + Di : k0;
    VF a0[4], a1[4];
    for (int rr = 0; rr < 4; ++rr) a0[rr] = a1[rr] = hn::Zero(df);
    for (size_t d = 0; d < dv; d += N) {
      const VF x0 = LoadF32(df, k0 + d), x1 = LoadF32(df, k1 + d);
      for (int rr = 0; rr < NR; ++rr) {
        const VF qv = hn::LoadU(df, q + rr * Di + d);
        a0[rr] = hn::MulAdd(x0, qv, a0[rr]);
        a1[rr] = hn::MulAdd(x1, qv, a1[rr]);
      }
    }
    float s0[4], s1[4];
    Sum4(a0[0], a0[1], a0[2], a0[3], s0);
    Sum4(a1[0], a1[1], a1[2], a1[3], s1);
    for (int rr = 0; rr < NR; ++rr) {
      for (size_t d = dv; d < Di; ++d) {
        s0[rr] += q[rr * Di + d] * ToF32(k0[d]);
        s1[rr] += q[rr * Di + d] * ToF32(k1[d]);
      }
      if (kscale != nullptr) {
        s0[rr] *= kscale[j];
        if (two) s1[rr] *= kscale[j + 1];
      }
      logit[rr * ldl + j] = s0[rr];
      if (two) logit[rr * ldl + j + 1] = s1[rr];
    }
  }
}

// max(a, b) where a NaN on either side wins (docs/spec.md: NaN logits reach the score).
HWY_INLINE float NanMax(float a, float b) { return std::isnan(a) || a >= b ? a : b; }

// Pools logits [0, n) of one row (n = the row's valid keys in the block).
HWY_INLINE float PoolRow(const float* x, size_t n, bool lse) {
  float mx = kNegInf;
  for (size_t j = 0; j < n; ++j) mx = NanMax(mx, x[j]);
  if (!lse || mx == kNegInf || std::isnan(mx)) return mx;
  float sum = 0.0f;
  for (size_t j = 0; j < n; ++j) sum += std::exp(x[j] - mx);
  return mx + std::log(sum);
}

// Logits of rows [0, rows) (q [rows][Di]) against keys j < nk: logit[r][j] (row stride ldl).
template <typename T>
HWY_INLINE void DotRows(const float* HWY_RESTRICT q, size_t rows, const T* HWY_RESTRICT k, size_t nk, size_t Di,
                        const float* HWY_RESTRICT kscale, float* HWY_RESTRICT logit, size_t ldl) {
  for (size_t r0 = 0; r0 < rows; r0 += 4) {
    float* l = logit + r0 * ldl;
    switch (std::min<size_t>(4, rows - r0)) {
      case 1:
        DotLogits<1>(q + r0 * Di, k, nk, Di, kscale, l, ldl);
        break;
      case 2:
        DotLogits<2>(q + r0 * Di, k, nk, Di, kscale, l, ldl);
        break;
      case 3:
        DotLogits<3>(q + r0 * Di, k, nk, Di, kscale, l, ldl);
        break;
      default:
        DotLogits<4>(q + r0 * Di, k, nk, Di, kscale, l, ldl);
        break;
    }
  }
}

// pooled[r] = the pooled logits s[r][0, n) of each row, n = its visible keys among nk.
HWY_INLINE void PoolDotRows(const float* s, size_t lds, size_t rows, const float* lim, float kpos0, size_t nk, bool lse,
                            float* pooled) {
  for (size_t r = 0; r < rows; ++r) {
    const float visible = lim[r] + 1.0f - kpos0;  // keys of this row in the block
    const size_t n = visible <= 0.0f ? 0 : std::min(nk, static_cast<size_t>(visible));
    pooled[r] = PoolRow(s + r * lds, n, lse);
  }
}

// Tag type of NVFP4 keys (fp4_e2m1x2 codes with e4m3 group scales).
struct Nvfp4Key {};

template <typename T>
void RunTask(const IndexerPlan& p, const IndexerPlan::Task& task) {
  const IndexerPlan::Group& grp = p.groups[static_cast<size_t>(task.group)];
  const SeqInfo& seq = p.batch.seqs[static_cast<size_t>(grp.seq)];
  const size_t Di = static_cast<size_t>(p.Di), Hi = static_cast<size_t>(p.Hi);
  const size_t Bs = static_cast<size_t>(p.Bs);
  const size_t N = hn::Lanes(DF());
  const size_t ntok = static_cast<size_t>(grp.t_end - grp.t_begin);
  const size_t rows = ntok * Hi;
  const bool dot = static_cast<int64_t>(rows) <= kIdxDotRows;
  const size_t rpad = (rows + 15) / 16 * 16;

  // Queries (scaled): dot -> q[r][Di]; GEMM -> qt[d][rpad]. Row r = (token i, head h).
  float* q = scratch_floats(0, Di * rpad);
  float* lim = scratch_floats(1, rpad);
  float* pooled = scratch_floats(2, rpad);
  for (size_t i = 0; i < ntok; ++i) {
    const int64_t t = grp.t_begin + static_cast<int64_t>(i);
    for (size_t h = 0; h < Hi; ++h) {
      const size_t r = i * Hi + h;
      const size_t src = (static_cast<size_t>(t) * Hi + h) * Di;
      for (size_t d = 0; d < Di; ++d) {
        const float x = hal::load_as_f32(p.q_dtype, p.qi, src + d) * p.scale;
        if (dot)
          q[r * Di + d] = x;
        else
          q[d * rpad + r] = x;
      }
      lim[r] = static_cast<float>(seq.pos0 + (t - seq.q_begin));
    }
  }
  if (!dot)
    for (size_t r = rows; r < rpad; ++r) {
      for (size_t d = 0; d < Di; ++d) q[d * rpad + r] = 0.0f;
      lim[r] = lim[rows - 1];
    }
  const float max_lim = *std::max_element(lim, lim + rows);
  float* ktile = dot ? nullptr : scratch_floats(3, Bs * Di);
  float* s = scratch_floats(4, std::max(Bs * kTileVecs * N, Bs * static_cast<size_t>(kIdxDotRows)));

  constexpr bool kFp4 = std::is_same_v<T, Nvfp4Key>;
  const size_t G = Di / 16;  // NVFP4 groups per key row
  // NVFP4: the block's group multipliers (0.5 * scale, see DecodeNvfp4) and, for decode,
  // the decoded rows of one L1-sized run.
  float* gmul = kFp4 ? scratch_floats(5, Bs * G) : nullptr;
  const size_t run_rows = std::max<size_t>(2, 4096 / Di);
  float* kdec = kFp4 && dot ? scratch_floats(3, run_rows * Di) : nullptr;

  const int64_t c0 = task.chunk * kIdxChunkBlocks;
  const int64_t c1 = std::min(grp.n_blocks, c0 + kIdxChunkBlocks);
  for (int64_t c = c0; c < c1; ++c) {
    const int64_t page = p.block_table[grp.seq * p.max_blocks + c];
    const float kpos0 = static_cast<float>(c * p.Bs);
    // Keys past the group's last query are never valid: do not read them.
    const size_t nk = static_cast<size_t>(std::min<int64_t>(std::min<int64_t>(p.Bs, seq.kv_len - c * p.Bs),
                                                            static_cast<int64_t>(max_lim) + 1 - c * p.Bs));
    if constexpr (kFp4) {
      // Only the nk rows read below have their scales converted (slack scales may be NaN).
      const uint8_t* kb = static_cast<const uint8_t*>(p.ki) + static_cast<size_t>(page) * Bs * (Di / 2);
      ConvertRow(reinterpret_cast<const Fp8E4m3*>(p.ki_group_scale + static_cast<size_t>(page) * Bs * G), nk * G, 0.5f,
                 gmul);
      if (dot) {
        // Logits of row r go to s[r][Bs]; each run of rows is decoded once for all rows.
        for (size_t j0 = 0; j0 < nk; j0 += run_rows) {
          const size_t m = std::min(run_rows, nk - j0);
          DecodeNvfp4(kb + j0 * (Di / 2), gmul + j0 * G, m * G, kdec);
          DotRows(q, rows, kdec, m, Di, nullptr, s + j0, Bs);
        }
        PoolDotRows(s, Bs, rows, lim, kpos0, nk, p.pool_lse, pooled);
      } else {
        DecodeNvfp4(kb, gmul, nk * G, ktile);
        ScoreTileRows(q, rpad, lim, ktile, nk, Di, kpos0, p.pool_lse, s, pooled);
      }
    } else {
      const T* kb = static_cast<const T*>(p.ki) + static_cast<size_t>(page) * Bs * Di;
      const float* ks = p.ki_scale != nullptr ? p.ki_scale + static_cast<size_t>(page) * Bs : nullptr;
      if (dot) {
        DotRows(q, rows, kb, nk, Di, ks, s, Bs);
        PoolDotRows(s, Bs, rows, lim, kpos0, nk, p.pool_lse, pooled);
      } else {
        ConvertRows(kb, Di, nk, Di, ks, ktile);
        ScoreTileRows(q, rpad, lim, ktile, nk, Di, kpos0, p.pool_lse, s, pooled);
      }
    }
    // Per query block: the maximum over its queries.
    for (int64_t n = grp.qb_begin; n < grp.qb_end; ++n) {
      const QBlock& qb = p.batch.qblocks[static_cast<size_t>(n)];
      for (size_t h = 0; h < Hi; ++h) {
        float best = kNegInf;
        for (int64_t t = qb.t_begin; t < qb.t_end; ++t)
          best = NanMax(best, pooled[static_cast<size_t>(t - grp.t_begin) * Hi + h]);
        p.score[(static_cast<size_t>(n) * Hi + h) * p.max_blocks + c] = best;
      }
    }
  }
  if (task.chunk == 0) {  // blocks past the group's last query block: -inf
    for (int64_t n = grp.qb_begin; n < grp.qb_end; ++n)
      for (size_t h = 0; h < Hi; ++h) {
        float* row = p.score + (static_cast<size_t>(n) * Hi + h) * p.max_blocks;
        std::fill(row + grp.n_blocks, row + p.max_blocks, kNegInf);
      }
  }
}

void RunIndexerPlan(const IndexerPlan& p) {
  parallel_for(static_cast<int64_t>(p.tasks.size()), [&](int64_t i) {
    const IndexerPlan::Task& t = p.tasks[static_cast<size_t>(i)];
    switch (p.k_dtype) {
      case hal::DType::f32:
        RunTask<float>(p, t);
        break;
      case hal::DType::fp8_e4m3:
        RunTask<Fp8E4m3>(p, t);
        break;
      case hal::DType::fp4_e2m1x2:
        RunTask<Nvfp4Key>(p, t);
        break;
      default:
        RunTask<hwy::bfloat16_t>(p, t);
        break;
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

#include "backends/cpu/kernels.h"
#include "hal/error.h"

namespace msa::cpu {

HWY_EXPORT(RunIndexerPlan);

void indexer_score(hal::Stream&, const ops::IndexerScoreArgs& a) {
  const char* op = "indexer_score";
  IndexerPlan p;
  p.q_dtype = a.qi.dtype;
  p.k_dtype = a.ki_cache.dtype;
  p.qi = a.qi.data<const void>();
  p.ki = a.ki_cache.data<const void>();
  p.ki_scale =
      a.ki_scale.present() && a.ki_cache.dtype == hal::DType::fp8_e4m3 ? a.ki_scale.data<const float>() : nullptr;
  p.ki_group_scale = a.ki_cache.dtype == hal::DType::fp4_e2m1x2 ? a.ki_scale.data<const uint8_t>() : nullptr;
  p.block_table = a.block_table.data<const int32_t>();
  p.score = a.block_score.data<float>();
  p.max_blocks = a.block_table.dim(1);
  p.Hi = a.qi.dim(1);
  p.Di = a.qi.dim(2);
  p.Bs = a.ki_cache.dim(1);
  p.scale = a.scale != 0.0f ? a.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.Di)));
  p.pool_lse = a.pool == ops::Pool::lse;
  p.batch = make_batch(op, a.cu_q, a.kv_len, a.qi.dim(0), p.Bs, p.max_blocks, a.Qb);
  check_nq(op, p.batch, a.NQ);
  check_block_table(op, p.batch, a.block_table, a.ki_cache.dim(0));

  // Groups: consecutive query blocks of a sequence up to kIdxGroupRows rows (a larger
  // query block is a group of its own).
  const int64_t max_tok = std::max<int64_t>(1, kIdxGroupRows / p.Hi);
  for (size_t b = 0; b < p.batch.seqs.size(); ++b) {
    const SeqInfo& s = p.batch.seqs[b];
    int64_t n = s.qb_begin;
    while (n < s.qb_begin + s.n_qb) {
      IndexerPlan::Group g;
      g.seq = static_cast<int64_t>(b);
      g.qb_begin = n;
      g.t_begin = p.batch.qblocks[static_cast<size_t>(n)].t_begin;
      ++n;
      while (n < s.qb_begin + s.n_qb && p.batch.qblocks[static_cast<size_t>(n)].t_end - g.t_begin <= max_tok) ++n;
      g.qb_end = n;
      const QBlock& last = p.batch.qblocks[static_cast<size_t>(n - 1)];
      g.t_end = last.t_end;
      g.n_blocks = last.p1 / p.Bs + 1;
      g.n_chunks = ceil_div(g.n_blocks, kIdxChunkBlocks);
      for (int64_t c = 0; c < g.n_chunks; ++c) p.tasks.push_back({static_cast<int64_t>(p.groups.size()), c});
      p.groups.push_back(g);
    }
  }
  HWY_DYNAMIC_DISPATCH(RunIndexerPlan)(p);
}

}  // namespace msa::cpu
#endif  // HWY_ONCE
