// The shared core of dense_attention_backward and sparse_block_attention_backward
// (docs/training.md, the ops in <op>.cpp) on the paged cache, in f32 on the oneTBB arena,
// with the tiles of backward_core-inl.h, and delta = dot(dout, out), which
// patch_attention_3d_backward shares. Deterministic for any thread count: one task per
// (page, KV head) slab takes the (token, block) entries that attended it, from an inverse
// index in token order, in batches of query rows; each batch forms S, P, dP, dS once,
// adds dK / dV into the slab's rows (the task owns them, no atomics) and forms the
// batch's dq terms dS K as one tile product, stored per (entry, head). dq needs a sum over
// slabs: a second pass, one task per (token, KV head), adds its entries' terms in list
// order. Nothing is recomputed (recomputing S and dP in a query-outer pass would cost two
// of the five products again); the terms are D floats per (entry, head), so the tokens
// run in chunks that bound that buffer (kDqTermFloats) and dK / dV add each chunk's slab
// sums in chunk order. Index data is validated by the reference's checks before any work.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/attention_backward.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/backward_core-inl.h"
#include "backends/cpu/backward_inputs.h"
#include "backends/cpu/inverse_index.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// delta[r] = dot(dout row r, out row r) for rows of D elements (ChainDot).
void RowDots(const float* dout, const float* out, int64_t rows, int64_t D, float* delta) {
  parallel_for(
      rows, [&](int64_t r) { delta[r] = ChainDot(dout + r * D, out + r * D, static_cast<size_t>(D)); }, 64);
}

// dK / dV of every slab over the entries [e_lo, e_hi) that attended it (cursor[slab]: its
// first inverse-index position not yet done), and each entry's dq term dS K (unscaled)
// into dqp (entry e, head hh at dqp[((e - e_lo) * G + hh) * D]).
void PagedSlabs(const PagedBackwardInputs& c, const InverseIndex& inv, int64_t e_lo, int64_t e_hi, int64_t* cursor,
                float* dqp, float* dk, float* dv) {
  const size_t D = static_cast<size_t>(c.D), Bs = static_cast<size_t>(c.Bs), G = static_cast<size_t>(c.G);
  const size_t per_batch = std::max<size_t>(1, kBackwardRows / G);  // entries per batch
  parallel_for(c.P * c.Hkv, [&](int64_t slab) {
    const int64_t w0 = cursor[slab];
    int64_t w1 = w0, seen = 0;  // seen: slots any of the entries sees
    for (; w1 < inv.begin[static_cast<size_t>(slab) + 1] && inv.entry[static_cast<size_t>(w1)] < e_hi; ++w1) {
      const int64_t e = inv.entry[static_cast<size_t>(w1)];
      seen = std::max(seen, c.visible(inv.owner[static_cast<size_t>(e)] / c.Hkv, c.tb.list[static_cast<size_t>(e)]));
    }
    cursor[slab] = w1;
    if (w0 == w1) return;
    const int64_t g = slab % c.Hkv;
    const size_t off = static_cast<size_t>(slab) * Bs * D;
    BackwardTile tile;
    LoadKeyTile(tile, D, Bs, c.k.data() + off, c.v.data() + off, D, scratch_floats(0, KeyTileFloats(D, Bs)));
    // The keys row-major for dq, the slots no entry sees zeroed (slack slots may hold NaN).
    float* krow = scratch_floats(5, tile.kpad * D);
    std::copy(c.k.data() + off, c.k.data() + off + static_cast<size_t>(seen) * D, krow);
    std::fill(krow + static_cast<size_t>(seen) * D, krow + tile.kpad * D, 0.0f);
    float* dqb = scratch_floats(6, kBackwardRows * D);
    RowBatch b(D);
    for (int64_t w = w0; w < w1; w += static_cast<int64_t>(per_batch)) {
      const int64_t wend = std::min(w1, w + static_cast<int64_t>(per_batch));
      b.rows = 0;
      for (int64_t i = w; i < wend; ++i) {
        const int64_t e = inv.entry[static_cast<size_t>(i)], t = inv.owner[static_cast<size_t>(e)] / c.Hkv;
        const int64_t keys = c.visible(t, c.tb.list[static_cast<size_t>(e)]);
        for (int64_t h = g * c.G; h < (g + 1) * c.G; ++h) {
          const size_t row = static_cast<size_t>(t * c.Hq + h);
          b.add(c.q.data() + row * D, c.dout.data() + row * D, D, c.scale, c.lse[row], c.delta[row], keys);
        }
      }
      BackwardBatch(tile, b.qs, b.go, b.rows, b.lse, b.delta, b.nvis);
      const size_t hi = static_cast<size_t>(*std::max_element(b.nvis, b.nvis + b.rows));
      RowsTimesKeys(tile.dp, tile.kpad, b.rows, hi == 0 ? 0 : PadKeys(hi), krow, D, dqb);
      for (int64_t i = w; i < wend; ++i) {
        const size_t r0 = static_cast<size_t>(i - w) * G;
        std::copy(dqb + r0 * D, dqb + (r0 + G) * D,
                  dqp + static_cast<size_t>(inv.entry[static_cast<size_t>(i)] - e_lo) * G * D);
      }
    }
    AddTransposed(tile.dkt, tile.kpad, Bs, D, dk + off, D);
    AddTransposed(tile.dvt, tile.kpad, Bs, D, dv + off, D);
  });
}

// dq of the (token, KV head) pairs [tg0, tg1): the dq terms of their entries (entry ids
// from e_lo) summed in list order, times scale.
void PagedDq(const PagedBackwardInputs& c, int64_t e_lo, int64_t tg0, int64_t tg1, const float* dqp, float* dq) {
  const DF df;
  const size_t N = hn::Lanes(df), D = static_cast<size_t>(c.D);
  parallel_for(
      tg1 - tg0,
      [&](int64_t i) {
        const int64_t tg = tg0 + i, t = tg / c.Hkv, g = tg % c.Hkv;
        for (int64_t hh = 0; hh < c.G; ++hh) {
          const size_t row = static_cast<size_t>(t * c.Hq + g * c.G + hh);
          float* out = dq + row * D;
          std::fill(out, out + D, 0.0f);
          if (c.lse[row] == -std::numeric_limits<float>::infinity()) continue;
          for (int64_t e = c.tb.list_begin[static_cast<size_t>(tg)]; e < c.tb.list_begin[static_cast<size_t>(tg) + 1];
               ++e) {
            const float* src = dqp + static_cast<size_t>((e - e_lo) * c.G + hh) * D;
            size_t d = 0;
            for (; d + N <= D; d += N) hn::StoreU(hn::Add(hn::LoadU(df, out + d), hn::LoadU(df, src + d)), df, out + d);
            for (; d < D; ++d) out[d] += src[d];
          }
          for (size_t d = 0; d < D; ++d) out[d] *= c.scale;
        }
      },
      4);
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <utility>

#include "backends/cpu/f32_rows.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/attended_sets.h"
#include "backends/cpu_ref/common.h"
#include "hal/dtype.h"

namespace msa::cpu {

HWY_EXPORT(RowDots);
HWY_EXPORT(PagedSlabs);
HWY_EXPORT(PagedDq);

namespace {

// Upper bound of the stored dq terms (floats) per token chunk of a paged call (64 MiB,
// kept by the calling thread across calls: no fresh pages to fault in per call).
constexpr int64_t kDqTermFloats = int64_t{16} << 20;

}  // namespace

std::vector<float> row_dots(const std::vector<float>& dout, const std::vector<float>& out, int64_t D) {
  std::vector<float> delta(dout.size() / static_cast<size_t>(D));
  HWY_DYNAMIC_DISPATCH(RowDots)(dout.data(), out.data(), static_cast<int64_t>(delta.size()), D, delta.data());
  return delta;
}

PagedBackwardInputs paged_backward_inputs(const hal::Tensor& dout, const hal::Tensor& q, const hal::Tensor& k_cache,
                                          const hal::Tensor& v_cache, const hal::Tensor& block_table,
                                          const hal::Tensor& out, const hal::Tensor& lse, float scale, TokenBlocks tb) {
  PagedBackwardInputs c;
  c.block_table = block_table.data<const int32_t>();
  c.max_blocks = block_table.dim(1);
  c.T = q.dim(0), c.Hq = q.dim(1), c.D = q.dim(2);
  c.P = k_cache.dim(0), c.Hkv = k_cache.dim(1), c.Bs = k_cache.dim(2), c.G = c.Hq / c.Hkv;
  c.scale = static_cast<float>(cpu_ref::resolve_scale(scale, c.D));
  c.q = to_f32(q, c.D), c.dout = to_f32(dout, c.D), c.k = to_f32(k_cache, c.D), c.v = to_f32(v_cache, c.D);
  c.lse = to_f32(lse, c.Hq);
  c.delta = row_dots(c.dout, to_f32(out, c.D), c.D);
  c.tb = std::move(tb);
  return c;
}

void run_paged_backward(const PagedBackwardInputs& c, const hal::Tensor& dq_out, const hal::Tensor& dk_out,
                        const hal::Tensor& dv_out) {
  // For each (page, KV head) slab, the (token, block) entries that attended it, in token order.
  const InverseIndex inv(c.tb.list_begin, c.P * c.Hkv, [&](int64_t tg, int64_t e) {
    return c.page(tg / c.Hkv, c.tb.list[static_cast<size_t>(e)]) * c.Hkv + tg % c.Hkv;
  });
  float* dk = dk_out.data<float>();
  float* dv = dv_out.data<float>();
  const int64_t n = c.P * c.Hkv * c.Bs * c.D;
  parallel_for((n + 4095) / 4096, [&](int64_t i) {
    std::fill(dk + i * 4096, dk + std::min(n, (i + 1) * 4096), 0.0f);
    std::fill(dv + i * 4096, dv + std::min(n, (i + 1) * 4096), 0.0f);
  });
  std::vector<int64_t> cursor(inv.begin.begin(), inv.begin.end() - 1);
  const int64_t per_entry = c.G * c.D, pairs = c.T * c.Hkv;
  for (int64_t tg0 = 0; tg0 < pairs;) {
    // The chunk: the pairs from tg0 whose entries fit the buffer (at least one pair).
    const auto& lb = c.tb.list_begin;
    int64_t tg1 = tg0 + 1;
    while (tg1 < pairs &&
           (lb[static_cast<size_t>(tg1) + 1] - lb[static_cast<size_t>(tg0)]) * per_entry <= kDqTermFloats)
      ++tg1;
    const int64_t e_lo = lb[static_cast<size_t>(tg0)], e_hi = lb[static_cast<size_t>(tg1)];
    thread_local std::vector<float> dq_terms;
    dq_terms.resize(std::max(dq_terms.size(), static_cast<size_t>((e_hi - e_lo) * per_entry)));
    float* dqp = dq_terms.data();
    HWY_DYNAMIC_DISPATCH(PagedSlabs)(c, inv, e_lo, e_hi, cursor.data(), dqp, dk, dv);
    HWY_DYNAMIC_DISPATCH(PagedDq)(c, e_lo, tg0, tg1, dqp, dq_out.data<float>());
    tg0 = tg1;
  }
}

}  // namespace msa::cpu
#endif  // HWY_ONCE
