// dense_attention_backward and sparse_block_attention_backward (docs/training.md) on the
// paged cache, and patch_attention_3d_backward, in f32 on the oneTBB arena. Deterministic
// for any thread count:
//  - dq: one task per (token, KV head) walks its attended slots in a fixed order;
//  - dk_cache / dv_cache: one task per (page, KV head) slab loops over the queries that
//    attended it, from an inverse index built per call in token order (no atomics);
//  - patch attention: one task per (window, head) owns every gradient row it writes.
// Index data is validated by the reference's checks before any work.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "backends/cpu/f32_rows.h"
#include "backends/cpu/inverse_index.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/token_blocks.h"
#include "backends/cpu_ref/attended_sets.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/patch_windows.h"
#include "hal/dtype.h"

namespace msa::cpu {
namespace {

struct Call {
  const hal::Tensor& block_table;
  int64_t T, Hq, D, P, Hkv, Bs, G;
  float scale;
  std::vector<float> q, dout, k, v, lse, delta;  // delta [T][Hq] = dot(dout, out)
  TokenBlocks tb;                                // per (token, KV head)

  int64_t page(int64_t t, int64_t c) const {
    return block_table.data<const int32_t>()[tb.seq[static_cast<size_t>(t)] * block_table.dim(1) + c];
  }

  // p and ds of query row (t, h) for the key/value slot at element offset off.
  void p_ds(int64_t t, int64_t h, int64_t off, float& p, float& ds) const {
    const size_t row = static_cast<size_t>((t * Hq + h) * D);
    p = std::exp(scale * dot(q.data() + row, k.data() + off, D) - lse[static_cast<size_t>(t * Hq + h)]);
    ds = p * (dot(dout.data() + row, v.data() + off, D) - delta[static_cast<size_t>(t * Hq + h)]);
  }
};

Call make_call(const hal::Tensor& dout, const hal::Tensor& q, const hal::Tensor& k_cache, const hal::Tensor& v_cache,
               const hal::Tensor& block_table, const hal::Tensor& out, const hal::Tensor& lse, float scale,
               TokenBlocks tb) {
  Call c{block_table, q.dim(0), q.dim(1), q.dim(2), k_cache.dim(0), k_cache.dim(1), k_cache.dim(2),
         q.dim(1) / k_cache.dim(1), static_cast<float>(cpu_ref::resolve_scale(scale, q.dim(2))),
         {}, {}, {}, {}, {}, {}, std::move(tb)};
  c.q = to_f32(q, c.D), c.dout = to_f32(dout, c.D), c.k = to_f32(k_cache, c.D), c.v = to_f32(v_cache, c.D);
  c.lse = to_f32(lse, c.Hq);
  const std::vector<float> o = to_f32(out, c.D);
  c.delta.resize(static_cast<size_t>(c.T * c.Hq));
  parallel_for(c.T * c.Hq, [&](int64_t r) {
    c.delta[static_cast<size_t>(r)] = dot(c.dout.data() + r * c.D, o.data() + r * c.D, c.D);
  }, 64);
  return c;
}

// dq of every (token, KV head), then dk / dv of every (page, KV head) slab.
void run(Call& c, const hal::Tensor& dq_out, const hal::Tensor& dk_out, const hal::Tensor& dv_out) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  float* dq = dq_out.data<float>();
  parallel_for(c.T * c.Hkv, [&](int64_t tg) {
    const int64_t t = tg / c.Hkv, g = tg % c.Hkv;
    for (int64_t h = g * c.G; h < (g + 1) * c.G; ++h) {
      float* row = dq + (t * c.Hq + h) * c.D;
      std::fill(row, row + c.D, 0.0f);
      if (c.lse[static_cast<size_t>(t * c.Hq + h)] == neg_inf) continue;
      for (int64_t e = c.tb.list_begin[static_cast<size_t>(tg)]; e < c.tb.list_begin[static_cast<size_t>(tg) + 1]; ++e) {
        const int64_t blk = c.tb.list[static_cast<size_t>(e)], page = c.page(t, blk);
        const int64_t s_end = std::min({(blk + 1) * c.Bs, c.tb.kv_len[static_cast<size_t>(t)], c.tb.pos[static_cast<size_t>(t)] + 1});
        for (int64_t s = blk * c.Bs; s < s_end; ++s) {
          const int64_t off = ((page * c.Hkv + g) * c.Bs + (s - blk * c.Bs)) * c.D;
          float p, ds;
          c.p_ds(t, h, off, p, ds);
          for (int64_t d = 0; d < c.D; ++d) row[d] += c.scale * ds * c.k[static_cast<size_t>(off + d)];
        }
      }
    }
  }, 4);
  // For each (page, KV head) slab, the (token, block) entries that attended it, in token order.
  const InverseIndex inv(c.tb.list_begin, c.P * c.Hkv, [&](int64_t tg, int64_t e) {
    return c.page(tg / c.Hkv, c.tb.list[static_cast<size_t>(e)]) * c.Hkv + tg % c.Hkv;
  });
  float* dk = dk_out.data<float>();
  float* dv = dv_out.data<float>();
  parallel_for(c.P * c.Hkv, [&](int64_t slab) {
    const int64_t g = slab % c.Hkv, n = c.Bs * c.D;
    float* dks = dk + slab * n;
    float* dvs = dv + slab * n;
    std::fill(dks, dks + n, 0.0f);
    std::fill(dvs, dvs + n, 0.0f);
    for (int64_t w = inv.begin[static_cast<size_t>(slab)]; w < inv.begin[static_cast<size_t>(slab) + 1]; ++w) {
      const int64_t e = inv.entry[static_cast<size_t>(w)], t = inv.owner[static_cast<size_t>(e)] / c.Hkv;
      const int64_t blk = c.tb.list[static_cast<size_t>(e)];
      const int64_t s_end = std::min({(blk + 1) * c.Bs, c.tb.kv_len[static_cast<size_t>(t)], c.tb.pos[static_cast<size_t>(t)] + 1});
      for (int64_t h = g * c.G; h < (g + 1) * c.G; ++h) {
        if (c.lse[static_cast<size_t>(t * c.Hq + h)] == neg_inf) continue;
        const float* qr = c.q.data() + (t * c.Hq + h) * c.D;
        const float* dor = c.dout.data() + (t * c.Hq + h) * c.D;
        for (int64_t s = blk * c.Bs; s < s_end; ++s) {
          const int64_t j = s - blk * c.Bs;
          float p, ds;
          c.p_ds(t, h, slab * n + j * c.D, p, ds);
          for (int64_t d = 0; d < c.D; ++d) {
            dks[j * c.D + d] += c.scale * ds * qr[d];
            dvs[j * c.D + d] += p * dor[d];
          }
        }
      }
    }
  });
}

}  // namespace

void dense_attention_backward(hal::Stream&, const ops::DenseAttentionBackwardArgs& a) {
  const cpu_ref::Batch batch =
      cpu_ref::checked_dense_batch("dense_attention_backward", a.q, a.k_cache, a.block_table, a.kv_len, a.cu_q);
  Call c = make_call(a.dout, a.q, a.k_cache, a.v_cache, a.block_table, a.out, a.lse, a.scale,
                     TokenBlocks(batch, a.q.dim(0), nullptr, false, a.k_cache.dim(1), a.k_cache.dim(2)));
  run(c, a.dq, a.dk_cache, a.dv_cache);
}

void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs& a) {
  const cpu_ref::Batch batch = cpu_ref::checked_sparse_batch("sparse_block_attention_backward", a.q, a.k_cache,
                                                             a.block_table, a.kv_len, a.cu_q, a.Qb, a.NQ, a.mode,
                                                             a.block_idx);
  const bool shared = a.mode == ops::SelectionMode::shared;
  Call c = make_call(a.dout, a.q, a.k_cache, a.v_cache, a.block_table, a.out, a.lse, a.scale,
                     TokenBlocks(batch, a.q.dim(0), &a.block_idx, shared, a.k_cache.dim(1), a.k_cache.dim(2)));
  run(c, a.dq, a.dk_cache, a.dv_cache);
}

void patch_attention_3d_backward(hal::Stream&, const ops::PatchAttention3dBackwardArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const auto windows = cpu_ref::checked_windows("patch_attention_3d_backward", a.items, a.window, N);
  const float scale = static_cast<float>(cpu_ref::resolve_scale(a.scale, D));
  const std::vector<float> q = to_f32(a.q, D), k = to_f32(a.k, D), v = to_f32(a.v, D), dout = to_f32(a.dout, D),
                           out = to_f32(a.out, D), lse = to_f32(a.lse, H);
  float* dq = a.dq.data<float>();
  float* dk = a.dk.data<float>();
  float* dv = a.dv.data<float>();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  parallel_for(static_cast<int64_t>(windows.size()) * H, [&](int64_t task) {
    const cpu_ref::PatchWindow& w = windows[static_cast<size_t>(task / H)];
    const int64_t h = task % H;
    for (int64_t t = w.t_begin; t < w.t_end; ++t)
      for (float* g : {dq, dk, dv}) std::fill(g + (t * H + h) * D, g + (t * H + h + 1) * D, 0.0f);
    for (int64_t t = w.t_begin; t < w.t_end; ++t) {
      const int64_t row = (t * H + h) * D;
      const float l = lse[static_cast<size_t>(t * H + h)];
      if (l == neg_inf) continue;
      const float delta = dot(dout.data() + row, out.data() + row, D);
      for (int64_t s = w.t_begin; s < w.t_end; ++s) {
        const int64_t key = (s * H + h) * D;
        const float p = std::exp(scale * dot(q.data() + row, k.data() + key, D) - l);
        const float ds = p * (dot(dout.data() + row, v.data() + key, D) - delta);
        for (int64_t d = 0; d < D; ++d) {
          dq[row + d] += scale * ds * k[static_cast<size_t>(key + d)];
          dk[key + d] += scale * ds * q[static_cast<size_t>(row + d)];
          dv[key + d] += p * dout[static_cast<size_t>(row + d)];
        }
      }
    }
  });
}

}  // namespace msa::cpu
