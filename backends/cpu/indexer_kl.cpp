// indexer_kl (docs/training.md) in f32 on the oneTBB arena, in three passes over the
// attended slots, each slot's target and logit formed once. Deterministic for any thread
// count (every sum in an order fixed by the inputs, no atomics):
//  1. one task per page takes the (token, selection head) entries that attended it, from
//     an inverse index in token order: the page's keys of each KV head and its indexer keys
//     are transposed once (keys in vector lanes, backward_core-inl.h) and scored against
//     batches of query rows (the target's scores in f64, the logits in f32); per entry and
//     slot it stores the target's sum over the group's heads (head order) and the logit;
//  2. one task per (token, selection head): the student's softmax, kl, the logit gradient
//     w (u - p) of each slot (in place of the target) and dqi = sum w (u - p) ki;
//  3. one task per page: dki_cache = sum over its entries (in order) of w (u - p) qi.
// Index data is validated by the reference's checks before any work.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/indexer_kl.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/backward_core-inl.h"
#include "backends/cpu/inverse_index.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "backends/cpu/token_blocks.h"
#include "hwy/highway.h"

#ifndef MSA_CPU_INDEXER_KL_INPUTS_
#define MSA_CPU_INDEXER_KL_INPUTS_
namespace msa::cpu {
// One call's inputs as f32, its token blocks and the per-slot buffers (entry e's slots at
// e * kpad: the target, then the logit gradient; the logits).
struct KlInputs {
  int64_t T = 0, Hq = 0, D = 0, P = 0, Hkv = 0, Bs = 0, Hs = 0, Di = 0, G = 0, kpad = 0;
  bool shared = false;
  float scale = 1, scale_i = 1;
  const int32_t* block_table = nullptr;
  int64_t max_blocks = 0;
  std::vector<float> q, k, qi, ki, lse, dkl;
  TokenBlocks tb;           // per (token, selection head)
  float* target = nullptr;  // [entries][kpad]
  float* logit = nullptr;   // [entries][kpad]

  int64_t page(int64_t t, int64_t blk) const { return block_table[tb.seq[static_cast<size_t>(t)] * max_blocks + blk]; }
  int64_t visible(int64_t t, int64_t blk) const {
    return std::min({(blk + 1) * Bs, tb.kv_len[static_cast<size_t>(t)], tb.pos[static_cast<size_t>(t)] + 1}) - blk * Bs;
  }
  int64_t visible_of(int64_t e, int64_t tg) const { return visible(tg / Hs, tb.list[static_cast<size_t>(e)]); }
};
}  // namespace msa::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

constexpr float kKlNegInf = -std::numeric_limits<float>::infinity();

using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;

// s[r][j] = sum_d rows[r][d] * kt[d][j] in f64 (kt: [D][kpad] f64, rows: [n][D] f32) for
// r < n and the f32 key vectors below PadKeys(hi) (each two f64 vectors), JR rows at a time.
template <int JR>
HWY_INLINE void ScorePanelF64(const double* HWY_RESTRICT kt, size_t kpad, const float* HWY_RESTRICT rows, size_t D,
                              double* HWY_RESTRICT s) {
  const DD dd;
  const size_t M = hn::Lanes(dd);
  VD a0[JR], a1[JR];
  for (int r = 0; r < JR; ++r) a0[r] = a1[r] = hn::Zero(dd);
  for (size_t d = 0; d < D; ++d) {
    const VD k0 = hn::LoadU(dd, kt + d * kpad), k1 = hn::LoadU(dd, kt + d * kpad + M);
    for (int r = 0; r < JR; ++r) {
      const VD x = hn::Set(dd, static_cast<double>(rows[r * D + d]));
      a0[r] = hn::MulAdd(x, k0, a0[r]);
      a1[r] = hn::MulAdd(x, k1, a1[r]);
    }
  }
  for (int r = 0; r < JR; ++r) {
    hn::StoreU(a0[r], dd, s + r * kpad);
    hn::StoreU(a1[r], dd, s + r * kpad + M);
  }
}

HWY_INLINE void ScoreRowsF64(const double* HWY_RESTRICT kt, size_t kpad, const float* HWY_RESTRICT rows, size_t n,
                             size_t D, size_t hi, double* HWY_RESTRICT s) {
  const size_t M = hn::Lanes(DD());
  for (size_t j0 = 0; j0 < hi; j0 += 2 * M) {
    size_t r = 0;
    for (; r + 4 <= n; r += 4) ScorePanelF64<4>(kt + j0, kpad, rows + r * D, D, s + r * kpad + j0);
    for (; r < n; ++r) ScorePanelF64<1>(kt + j0, kpad, rows + r * D, D, s + r * kpad + j0);
  }
}

// Keys per entry in the per-slot buffers: Bs padded to whole f32 vectors and pairs of
// f64 vectors (ScoreRowsF64) of this target.
size_t KeyVectorPad(size_t bs) {
  const size_t v = std::max(hn::Lanes(DF()), 2 * hn::Lanes(DD()));
  return (bs + v - 1) / v * v;
}

// Pass 1 for every page.
void KlScores(KlInputs& c, const InverseIndex& inv) {
  const size_t kpad = static_cast<size_t>(c.kpad), Bs = static_cast<size_t>(c.Bs);
  const size_t Dm = static_cast<size_t>(std::max(c.D, c.Di));
  parallel_for(c.P, [&](int64_t pg) {
    const int64_t w0 = inv.begin[static_cast<size_t>(pg)], w1 = inv.begin[static_cast<size_t>(pg) + 1];
    if (w0 == w1) return;
    float* kt = scratch_floats(0, Dm * kpad);
    double* ktd = reinterpret_cast<double*>(scratch_floats(5, 2 * static_cast<size_t>(c.D) * kpad));
    double* sd = reinterpret_cast<double*>(scratch_floats(6, 2 * kBackwardRows * kpad));
    float* rows = scratch_floats(1, kBackwardRows * Dm);
    float* s = scratch_floats(2, kBackwardRows * kpad);
    float* meta = scratch_floats(3, 3 * kBackwardRows);  // lse, then the row's entry (int64)
    int32_t* nvis = reinterpret_cast<int32_t*>(scratch_floats(4, kBackwardRows));
    int64_t* entry_of = reinterpret_cast<int64_t*>(meta + kBackwardRows);
    size_t n = 0;
    // Scores the batch's rows: logits (f32, against kt) stored, or the target's terms
    // exp(scale q.k - lse) (f64 scores against ktd, so that a term is exactly 1 where the
    // given lse is the exact score of a lone slot, as in the reference) added.
    auto flush = [&](size_t D, bool logits) {
      if (n == 0) return;
      const size_t hi = static_cast<size_t>(*std::max_element(nvis, nvis + n));
      if (logits) {
        ScoreRows(kt, kpad, rows, n, D, hi, s);
        for (size_t r = 0; r < n; ++r)
          std::copy(s + r * kpad, s + r * kpad + PadKeys(static_cast<size_t>(nvis[r])),
                    c.logit + static_cast<size_t>(entry_of[r]) * kpad);
        n = 0;
        return;
      }
      const DD dd;
      const hn::Rebind<float, DD> dh;
      const size_t M = hn::Lanes(dd);
      ScoreRowsF64(ktd, kpad, rows, n, D, hi, sd);
      for (size_t r = 0; r < n; ++r) {
        const VD l = hn::Set(dd, static_cast<double>(meta[r])), sc = hn::Set(dd, static_cast<double>(c.scale));
        float* dst = c.target + static_cast<size_t>(entry_of[r]) * kpad;
        for (size_t j = 0; j < static_cast<size_t>(nvis[r]); j += M) {
          const auto vis = hn::FirstN(dd, std::min(M, static_cast<size_t>(nvis[r]) - j));
          const VD p = hn::IfThenElseZero(vis, hn::Exp(dd, hn::Sub(hn::Mul(sc, hn::LoadU(dd, sd + r * kpad + j)), l)));
          hn::StoreU(hn::Add(hn::LoadU(dh, dst + j), hn::DemoteTo(dh, p)), dh, dst + j);
        }
      }
      n = 0;
    };
    for (int64_t w = w0; w < w1; ++w) {
      const size_t e = static_cast<size_t>(inv.entry[static_cast<size_t>(w)]);
      std::fill(c.target + e * kpad, c.target + (e + 1) * kpad, 0.0f);
    }
    // Target: the group's heads whose keys are KV head kh, head order overall.
    for (int64_t kh = 0; kh < c.Hkv; ++kh) {
      bool transposed = false;
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t e = inv.entry[static_cast<size_t>(w)], tg = inv.owner[static_cast<size_t>(e)];
        const int64_t t = tg / c.Hs, g = tg % c.Hs;
        if (!c.shared && g != kh) continue;
        if (!transposed) {
          const float* kr = c.k.data() + static_cast<size_t>((pg * c.Hkv + kh) * c.Bs * c.D);
          for (int64_t d = 0; d < c.D; ++d) {
            double* dst = ktd + static_cast<size_t>(d) * kpad;
            for (size_t j = 0; j < Bs; ++j) dst[j] = kr[j * static_cast<size_t>(c.D) + static_cast<size_t>(d)];
            std::fill(dst + Bs, dst + kpad, 0.0);
          }
          transposed = true;
        }
        for (int64_t h = kh * c.G; h < (kh + 1) * c.G; ++h) {
          const float l = c.lse[static_cast<size_t>(t * c.Hq + h)];
          if (l == kKlNegInf) continue;  // adds nothing to the target
          const float* qr = c.q.data() + (t * c.Hq + h) * c.D;
          std::copy(qr, qr + c.D, rows + n * static_cast<size_t>(c.D));
          meta[n] = l;
          entry_of[n] = e;
          nvis[n] = static_cast<int32_t>(c.visible_of(e, tg));
          if (++n == kBackwardRows) flush(static_cast<size_t>(c.D), false);
        }
      }
      flush(static_cast<size_t>(c.D), false);
    }
    // Student logits against the page's indexer keys.
    TransposeRows(c.ki.data() + static_cast<size_t>(pg * c.Bs * c.Di), static_cast<size_t>(c.Di), Bs,
                  static_cast<size_t>(c.Di), kt, kpad);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t e = inv.entry[static_cast<size_t>(w)], tg = inv.owner[static_cast<size_t>(e)];
      const float* qr = c.qi.data() + tg * c.Di;
      for (int64_t d = 0; d < c.Di; ++d)
        rows[n * static_cast<size_t>(c.Di) + static_cast<size_t>(d)] = c.scale_i * qr[d];
      entry_of[n] = e;
      nvis[n] = static_cast<int32_t>(c.visible_of(e, tg));
      if (++n == kBackwardRows) flush(static_cast<size_t>(c.Di), true);
    }
    flush(static_cast<size_t>(c.Di), true);
  });
}

// Pass 2 for every (token, selection head).
void KlRows(KlInputs& c, float* kl, float* dqi) {
  const size_t kpad = static_cast<size_t>(c.kpad), Di = static_cast<size_t>(c.Di);
  parallel_for(
      c.T * c.Hs,
      [&](int64_t tg) {
        const int64_t t = tg / c.Hs, e0 = c.tb.list_begin[static_cast<size_t>(tg)],
                      e1 = c.tb.list_begin[static_cast<size_t>(tg) + 1];
        float* dq = dqi + tg * c.Di;
        std::fill(dq, dq + Di, 0.0f);
        kl[tg] = 0.0f;
        if (e0 == e1) return;
        const DF df;
        const size_t N = hn::Lanes(df);
        auto vis_mask = [&](int64_t e, size_t j) {
          return hn::FirstN(df, std::min(N, static_cast<size_t>(c.visible(t, c.tb.list[static_cast<size_t>(e)])) - j));
        };
        auto slots = [&](int64_t e) { return static_cast<size_t>(c.visible(t, c.tb.list[static_cast<size_t>(e)])); };
        VF mx = hn::Set(df, kKlNegInf);
        for (int64_t e = e0; e < e1; ++e)
          for (size_t j = 0; j < slots(e); j += N)
            mx = hn::Max(mx,
                         hn::IfThenElse(vis_mask(e, j), hn::LoadU(df, c.logit + e * kpad + j), hn::Set(df, kKlNegInf)));
        const float m = hn::GetLane(hn::MaxOfLanes(df, mx));
        VF sum = hn::Zero(df);
        const VF mv = hn::Set(df, m);
        for (int64_t e = e0; e < e1; ++e)
          for (size_t j = 0; j < slots(e); j += N)
            sum = hn::Add(sum, hn::IfThenElseZero(vis_mask(e, j),
                                                  hn::Exp(df, hn::Sub(hn::LoadU(df, c.logit + e * kpad + j), mv))));
        const VF lse_u = hn::Set(df, m + std::log(hn::GetLane(hn::SumOfLanes(df, sum))));
        const VF nh = hn::Set(df, static_cast<float>(c.shared ? c.Hq : c.G));
        const VF w = hn::Set(df, (c.dkl.empty() ? 1.0f : c.dkl[static_cast<size_t>(tg)]) * c.scale_i);
        VF acc = hn::Zero(df);
        for (int64_t e = e0; e < e1; ++e) {
          for (size_t j = 0; j < slots(e); j += N) {
            const auto vis = vis_mask(e, j);
            float* pt = c.target + e * kpad + j;
            const VF p = hn::Div(hn::LoadU(df, pt), nh);
            const VF lu = hn::Sub(hn::LoadU(df, c.logit + e * kpad + j), lse_u);
            const auto live = hn::And(vis, hn::Ne(p, hn::Zero(df)));  // 0 log 0 = 0
            acc = hn::Add(acc, hn::IfThenElseZero(live, hn::Mul(p, hn::Sub(hn::Log(df, p), lu))));
            hn::StoreU(hn::IfThenElseZero(vis, hn::Mul(w, hn::Sub(hn::Exp(df, lu), p))), df, pt);  // d(dkl kl)/d(qi.ki)
          }
          const int64_t blk = c.tb.list[static_cast<size_t>(e)];
          AddWeightedRows(c.target + e * kpad, slots(e), c.ki.data() + c.page(t, blk) * c.Bs * c.Di, Di, Di, dq);
        }
        kl[tg] = hn::GetLane(hn::SumOfLanes(df, acc));
      },
      4);
}

// Pass 3 for every page.
void KlKeyGrads(const KlInputs& c, const InverseIndex& inv, float* dki) {
  const size_t kpad = static_cast<size_t>(c.kpad), Bs = static_cast<size_t>(c.Bs), Di = static_cast<size_t>(c.Di);
  parallel_for(c.P, [&](int64_t pg) {
    float* out = dki + static_cast<size_t>(pg) * Bs * Di;
    std::fill(out, out + Bs * Di, 0.0f);
    const int64_t w0 = inv.begin[static_cast<size_t>(pg)], w1 = inv.begin[static_cast<size_t>(pg) + 1];
    if (w0 == w1) return;
    float* acc = scratch_floats(0, Di * kpad);
    float* rows = scratch_floats(1, kBackwardRows * Di);
    float* coef = scratch_floats(2, kBackwardRows * kpad);
    std::fill(acc, acc + Di * kpad, 0.0f);
    for (int64_t w = w0; w < w1; w += static_cast<int64_t>(kBackwardRows)) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(w1 - w, static_cast<int64_t>(kBackwardRows)));
      size_t hi = 0;
      for (size_t r = 0; r < n; ++r) {
        const int64_t e = inv.entry[static_cast<size_t>(w) + r], tg = inv.owner[static_cast<size_t>(e)];
        const size_t vis = static_cast<size_t>(c.visible_of(e, tg));
        hi = std::max(hi, vis);
        std::copy(c.qi.data() + tg * c.Di, c.qi.data() + (tg + 1) * c.Di, rows + r * Di);
        std::copy(c.target + e * c.kpad, c.target + e * c.kpad + vis, coef + r * kpad);
        std::fill(coef + r * kpad + vis, coef + (r + 1) * kpad, 0.0f);
      }
      AccumulateRowsT(coef, kpad, rows, n, Di, hi, acc);
    }
    AddTransposed(acc, kpad, Bs, Di, out, Di);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

#include "backends/cpu/f32_rows.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/attended_sets.h"
#include "hal/error.h"

namespace msa::cpu {

HWY_EXPORT(KeyVectorPad);
HWY_EXPORT(KlScores);
HWY_EXPORT(KlRows);
HWY_EXPORT(KlKeyGrads);

void indexer_kl(hal::Stream&, const ops::IndexerKlArgs& a) {
  const char* op = "indexer_kl";
  const bool sparse = a.stage == ops::KlStage::sparse, shared = a.mode == ops::SelectionMode::shared;
  const cpu_ref::Batch batch = sparse
                                   ? cpu_ref::checked_sparse_batch(op, a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q,
                                                                   a.Qb, a.NQ, a.mode, a.block_idx)
                                   : cpu_ref::checked_dense_batch(op, a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q);
  KlInputs c;
  c.T = a.q.dim(0), c.Hq = a.q.dim(1), c.D = a.q.dim(2), c.P = a.k_cache.dim(0), c.Hkv = a.k_cache.dim(1);
  c.Bs = a.k_cache.dim(2), c.Hs = a.qi.dim(1), c.Di = a.qi.dim(2), c.G = c.Hq / c.Hkv;
  c.shared = shared;
  MSA_CHECK_ARG(c.Hs == (shared ? 1 : c.Hkv), op, "qi",
                "Hi must equal Hs (Hkv per_kv_head, 1 shared), got " + std::to_string(c.Hs));
  c.scale = static_cast<float>(cpu_ref::resolve_scale(a.scale, c.D));
  c.scale_i = static_cast<float>(cpu_ref::resolve_scale(a.scale_i, c.Di));
  c.block_table = a.block_table.data<const int32_t>();
  c.max_blocks = a.block_table.dim(1);
  c.tb = TokenBlocks(batch, c.T, sparse ? &a.block_idx : nullptr, shared, c.Hs, c.Bs);
  c.q = to_f32(a.q, c.D), c.k = to_f32(a.k_cache, c.D), c.qi = to_f32(a.qi, c.Di), c.ki = to_f32(a.ki_cache, c.Di);
  c.lse = to_f32(a.lse, c.Hq), c.dkl = to_f32(a.dkl, c.Hs);
  c.kpad = static_cast<int64_t>(HWY_DYNAMIC_DISPATCH(KeyVectorPad)(static_cast<size_t>(c.Bs)));
  const size_t slots = c.tb.list.size() * static_cast<size_t>(c.kpad);
  // Kept by the calling thread across calls (every element read is written first in
  // the call): no fresh pages to fault in and zero per call.
  thread_local std::vector<float> slot_buffer;
  slot_buffer.resize(std::max(slot_buffer.size(), 2 * slots));
  c.target = slot_buffer.data();
  c.logit = slot_buffer.data() + slots;
  // For each page, the (token, selection head) entries that attended it, in token order.
  const InverseIndex inv(c.tb.list_begin, c.P,
                         [&](int64_t tg, int64_t e) { return c.page(tg / c.Hs, c.tb.list[static_cast<size_t>(e)]); });
  HWY_DYNAMIC_DISPATCH(KlScores)(c, inv);
  HWY_DYNAMIC_DISPATCH(KlRows)(c, a.kl.data<float>(), a.dqi.data<float>());
  HWY_DYNAMIC_DISPATCH(KlKeyGrads)(c, inv, a.dki_cache.data<float>());
}

}  // namespace msa::cpu
#endif  // HWY_ONCE
