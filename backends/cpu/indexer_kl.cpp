// indexer_kl (docs/training.md) in f32 on the oneTBB arena. Deterministic for any thread
// count: one task per (token, selection head) computes kl, dqi and the logit gradients
// of its slots; one task per page then sums dki_cache over the (token, head) entries that
// attended the page, from an inverse index in token order (no atomics). Index data is
// validated by the reference's checks before any work.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/f32_rows.h"
#include "backends/cpu/inverse_index.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/token_blocks.h"
#include "backends/cpu_ref/attended_sets.h"
#include "hal/error.h"

namespace msa::cpu {

void indexer_kl(hal::Stream&, const ops::IndexerKlArgs& a) {
  const char* op = "indexer_kl";
  const bool sparse = a.stage == ops::KlStage::sparse, shared = a.mode == ops::SelectionMode::shared;
  const cpu_ref::Batch batch = sparse ? cpu_ref::checked_sparse_batch(op, a.q, a.k_cache, a.block_table, a.kv_len,
                                                                      a.cu_q, a.Qb, a.NQ, a.mode, a.block_idx)
                                      : cpu_ref::checked_dense_batch(op, a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q);
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2), P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1);
  const int64_t Bs = a.k_cache.dim(2), Hs = a.qi.dim(1), Di = a.qi.dim(2), G = Hq / Hkv;
  MSA_CHECK_ARG(Hs == (shared ? 1 : Hkv), op, "qi",
                "Hi must equal Hs (Hkv per_kv_head, 1 shared), got " + std::to_string(Hs));
  const float scale = static_cast<float>(cpu_ref::resolve_scale(a.scale, D));
  const float scale_i = static_cast<float>(cpu_ref::resolve_scale(a.scale_i, Di));
  const TokenBlocks tb(batch, T, sparse ? &a.block_idx : nullptr, shared, Hs, Bs);
  const std::vector<float> q = to_f32(a.q, D), k = to_f32(a.k_cache, D), qi = to_f32(a.qi, Di),
                           ki = to_f32(a.ki_cache, Di), lse = to_f32(a.lse, Hq), dkl = to_f32(a.dkl, Hs);
  const int32_t* bt = a.block_table.data<const int32_t>();
  const auto page = [&](int64_t t, int64_t blk) { return int64_t{bt[tb.seq[static_cast<size_t>(t)] * a.block_table.dim(1) + blk]}; };
  const auto slots = [&](int64_t t, int64_t blk) {
    return std::min({(blk + 1) * Bs, tb.kv_len[static_cast<size_t>(t)], tb.pos[static_cast<size_t>(t)] + 1}) - blk * Bs;
  };
  // The logit gradient of every attended slot: entry e's slots start at coeff_at[e].
  std::vector<int64_t> coeff_at(tb.list.size() + 1, 0);
  for (int64_t tg = 0; tg < T * Hs; ++tg)
    for (int64_t e = tb.list_begin[static_cast<size_t>(tg)]; e < tb.list_begin[static_cast<size_t>(tg) + 1]; ++e)
      coeff_at[static_cast<size_t>(e) + 1] = coeff_at[static_cast<size_t>(e)] + slots(tg / Hs, tb.list[static_cast<size_t>(e)]);
  std::vector<float> coeff(static_cast<size_t>(coeff_at.back()));
  float* kl = a.kl.data<float>();
  float* dqi = a.dqi.data<float>();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  parallel_for(T * Hs, [&](int64_t tg) {
    const int64_t t = tg / Hs, g = tg % Hs;
    const int64_t e0 = tb.list_begin[static_cast<size_t>(tg)], e1 = tb.list_begin[static_cast<size_t>(tg) + 1];
    float* p = coeff.data() + coeff_at[static_cast<size_t>(e0)];
    const int64_t n = coeff_at[static_cast<size_t>(e1)] - coeff_at[static_cast<size_t>(e0)];
    float* dq = dqi + tg * Di;
    std::fill(dq, dq + Di, 0.0f);
    kl[tg] = 0.0f;
    if (n == 0) return;
    // Target: the mean over the group's heads (a head whose lse is -inf adds nothing).
    const int64_t h0 = shared ? 0 : g * G, nh = shared ? Hq : G;
    std::fill(p, p + n, 0.0f);
    for (int64_t h = h0; h < h0 + nh; ++h) {
      const float l = lse[static_cast<size_t>(t * Hq + h)];
      if (l == neg_inf) continue;
      const float* qr = q.data() + (t * Hq + h) * D;
      for (int64_t e = e0, i = 0; e < e1; ++e) {
        const int64_t blk = tb.list[static_cast<size_t>(e)], pg = page(t, blk);
        for (int64_t j = 0; j < slots(t, blk); ++j, ++i)
          p[i] += std::exp(scale * dot(qr, k.data() + ((pg * Hkv + h / G) * Bs + j) * D, D) - l);
      }
    }
    for (int64_t i = 0; i < n; ++i) p[i] /= static_cast<float>(nh);
    // Student: softmax of the indexer logits.
    std::vector<float> logit(static_cast<size_t>(n));
    const float* qg = qi.data() + tg * Di;
    float m = neg_inf;
    for (int64_t e = e0, i = 0; e < e1; ++e) {
      const int64_t blk = tb.list[static_cast<size_t>(e)], pg = page(t, blk);
      for (int64_t j = 0; j < slots(t, blk); ++j, ++i) {
        logit[static_cast<size_t>(i)] = scale_i * dot(qg, ki.data() + (pg * Bs + j) * Di, Di);
        m = std::max(m, logit[static_cast<size_t>(i)]);
      }
    }
    float sum = 0;
    for (const float l : logit) sum += std::exp(l - m);
    const float lse_u = m + std::log(sum);
    float acc = 0;
    const float w = (dkl.empty() ? 1.0f : dkl[static_cast<size_t>(tg)]) * scale_i;
    for (int64_t e = e0, i = 0; e < e1; ++e) {
      const int64_t blk = tb.list[static_cast<size_t>(e)], pg = page(t, blk);
      for (int64_t j = 0; j < slots(t, blk); ++j, ++i) {
        const float lu = logit[static_cast<size_t>(i)] - lse_u;
        if (p[i] != 0.0f) acc += p[i] * (std::log(p[i]) - lu);
        p[i] = w * (std::exp(lu) - p[i]);  // now d(dkl kl) / d(qi . ki)
        const float* kr = ki.data() + (pg * Bs + j) * Di;
        for (int64_t d = 0; d < Di; ++d) dq[d] += p[i] * kr[d];
      }
    }
    kl[tg] = acc;
  }, 4);
  const InverseIndex inv(tb.list_begin, P, [&](int64_t tg, int64_t e) { return page(tg / Hs, tb.list[static_cast<size_t>(e)]); });
  float* dki = a.dki_cache.data<float>();
  parallel_for(P, [&](int64_t pg) {
    float* slab = dki + pg * Bs * Di;
    std::fill(slab, slab + Bs * Di, 0.0f);
    for (int64_t w = inv.begin[static_cast<size_t>(pg)]; w < inv.begin[static_cast<size_t>(pg) + 1]; ++w) {
      const int64_t e = inv.entry[static_cast<size_t>(w)], tg = inv.owner[static_cast<size_t>(e)];
      const float* qg = qi.data() + tg * Di;
      const float* c = coeff.data() + coeff_at[static_cast<size_t>(e)];
      for (int64_t j = 0; j < slots(tg / Hs, tb.list[static_cast<size_t>(e)]); ++j)
        for (int64_t d = 0; d < Di; ++d) slab[j * Di + d] += c[j] * qg[d];
    }
  });
}

}  // namespace msa::cpu
