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
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu_ref/attended_sets.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/patch_windows.h"
#include "hal/dtype.h"

namespace msa::cpu {
namespace {

// A tensor converted to f32, rows converted in parallel.
std::vector<float> to_f32(const hal::Tensor& t, int64_t row) {
  const int64_t n = t.numel();
  std::vector<float> v(static_cast<size_t>(n));
  const uint8_t* src = t.data<const uint8_t>();
  parallel_for((n + row - 1) / row, [&](int64_t r) {
    for (int64_t i = r * row; i < std::min(n, (r + 1) * row); ++i)
      v[static_cast<size_t>(i)] = hal::load_as_f32(t.dtype, src, static_cast<size_t>(i));
  }, 16);
  return v;
}

float dot(const float* a, const float* b, int64_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

struct Call {
  const hal::Tensor& block_table;
  int64_t T, Hq, D, P, Hkv, Bs, G;
  float scale;
  std::vector<float> q, dout, k, v, lse, delta;  // delta [T][Hq] = dot(dout, out)
  std::vector<int64_t> seq, pos, kv_len;         // per token
  // Attended logical blocks of (token t, KV head g): CSR over t * Hkv + g.
  std::vector<int64_t> list_begin;
  std::vector<int32_t> list;

  int64_t page(int64_t t, int64_t c) const {
    return block_table.data<const int32_t>()[seq[static_cast<size_t>(t)] * block_table.dim(1) + c];
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
               const cpu_ref::Batch& batch) {
  Call c{block_table, q.dim(0), q.dim(1), q.dim(2), k_cache.dim(0), k_cache.dim(1), k_cache.dim(2),
         q.dim(1) / k_cache.dim(1), static_cast<float>(cpu_ref::resolve_scale(scale, q.dim(2))),
         {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  c.q = to_f32(q, c.D), c.dout = to_f32(dout, c.D), c.k = to_f32(k_cache, c.D), c.v = to_f32(v_cache, c.D);
  c.lse = to_f32(lse, c.Hq);
  const std::vector<float> o = to_f32(out, c.D);
  c.delta.resize(static_cast<size_t>(c.T * c.Hq));
  parallel_for(c.T * c.Hq, [&](int64_t r) {
    c.delta[static_cast<size_t>(r)] = dot(c.dout.data() + r * c.D, o.data() + r * c.D, c.D);
  }, 64);
  c.seq.resize(static_cast<size_t>(c.T));
  c.pos.resize(static_cast<size_t>(c.T));
  c.kv_len.resize(static_cast<size_t>(c.T));
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const cpu_ref::Sequence& s = batch.seqs[b];
    for (int64_t i = 0; i < s.q_len; ++i) {
      c.seq[static_cast<size_t>(s.q_begin + i)] = static_cast<int64_t>(b);
      c.pos[static_cast<size_t>(s.q_begin + i)] = s.pos0 + i;
      c.kv_len[static_cast<size_t>(s.q_begin + i)] = s.kv_len;
    }
  }
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
      for (int64_t e = c.list_begin[static_cast<size_t>(tg)]; e < c.list_begin[static_cast<size_t>(tg) + 1]; ++e) {
        const int64_t blk = c.list[static_cast<size_t>(e)], page = c.page(t, blk);
        const int64_t s_end = std::min({(blk + 1) * c.Bs, c.kv_len[static_cast<size_t>(t)], c.pos[static_cast<size_t>(t)] + 1});
        for (int64_t s = blk * c.Bs; s < s_end; ++s) {
          const int64_t off = ((page * c.Hkv + g) * c.Bs + (s - blk * c.Bs)) * c.D;
          float p, ds;
          c.p_ds(t, h, off, p, ds);
          for (int64_t d = 0; d < c.D; ++d) row[d] += c.scale * ds * c.k[static_cast<size_t>(off + d)];
        }
      }
    }
  }, 4);
  // Inverse index: for each (page, KV head), the (token, block) pairs that attended it,
  // in token order.
  std::vector<int64_t> begin(static_cast<size_t>(c.P * c.Hkv) + 1, 0);
  for (int64_t tg = 0; tg < c.T * c.Hkv; ++tg)
    for (int64_t e = c.list_begin[static_cast<size_t>(tg)]; e < c.list_begin[static_cast<size_t>(tg) + 1]; ++e)
      ++begin[static_cast<size_t>(c.page(tg / c.Hkv, c.list[static_cast<size_t>(e)]) * c.Hkv + tg % c.Hkv) + 1];
  for (size_t i = 1; i < begin.size(); ++i) begin[i] += begin[i - 1];
  std::vector<int64_t> fill(begin.begin(), begin.end() - 1), who(static_cast<size_t>(begin.back()));
  for (int64_t tg = 0; tg < c.T * c.Hkv; ++tg)
    for (int64_t e = c.list_begin[static_cast<size_t>(tg)]; e < c.list_begin[static_cast<size_t>(tg) + 1]; ++e) {
      const int64_t slab = c.page(tg / c.Hkv, c.list[static_cast<size_t>(e)]) * c.Hkv + tg % c.Hkv;
      who[static_cast<size_t>(fill[static_cast<size_t>(slab)]++)] = e;  // entry e of token tg / Hkv
    }
  std::vector<int64_t> entry_tg(c.list.size());
  for (int64_t tg = 0; tg < c.T * c.Hkv; ++tg)
    for (int64_t e = c.list_begin[static_cast<size_t>(tg)]; e < c.list_begin[static_cast<size_t>(tg) + 1]; ++e)
      entry_tg[static_cast<size_t>(e)] = tg;
  float* dk = dk_out.data<float>();
  float* dv = dv_out.data<float>();
  parallel_for(c.P * c.Hkv, [&](int64_t slab) {
    const int64_t g = slab % c.Hkv, n = c.Bs * c.D;
    float* dks = dk + slab * n;
    float* dvs = dv + slab * n;
    std::fill(dks, dks + n, 0.0f);
    std::fill(dvs, dvs + n, 0.0f);
    for (int64_t w = begin[static_cast<size_t>(slab)]; w < begin[static_cast<size_t>(slab) + 1]; ++w) {
      const int64_t e = who[static_cast<size_t>(w)], t = entry_tg[static_cast<size_t>(e)] / c.Hkv;
      const int64_t blk = c.list[static_cast<size_t>(e)];
      const int64_t s_end = std::min({(blk + 1) * c.Bs, c.kv_len[static_cast<size_t>(t)], c.pos[static_cast<size_t>(t)] + 1});
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
  Call c = make_call(a.dout, a.q, a.k_cache, a.v_cache, a.block_table, a.out, a.lse, a.scale, batch);
  c.list_begin.assign(1, 0);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t g = 0; g < c.Hkv; ++g) {
      for (int64_t blk = 0; blk * c.Bs <= c.pos[static_cast<size_t>(t)]; ++blk) c.list.push_back(static_cast<int32_t>(blk));
      c.list_begin.push_back(static_cast<int64_t>(c.list.size()));
    }
  run(c, a.dq, a.dk_cache, a.dv_cache);
}

void sparse_block_attention_backward(hal::Stream&, const ops::SparseAttentionBackwardArgs& a) {
  const cpu_ref::Batch batch = cpu_ref::checked_sparse_batch("sparse_block_attention_backward", a.q, a.k_cache,
                                                             a.block_table, a.kv_len, a.cu_q, a.Qb, a.NQ, a.mode,
                                                             a.block_idx);
  Call c = make_call(a.dout, a.q, a.k_cache, a.v_cache, a.block_table, a.out, a.lse, a.scale, batch);
  const bool shared = a.mode == ops::SelectionMode::shared;
  std::vector<int64_t> qb_of(static_cast<size_t>(c.T));
  for (int64_t n = 0; n < batch.nq(); ++n)
    for (int64_t t = batch.qblocks[static_cast<size_t>(n)].t_begin; t < batch.qblocks[static_cast<size_t>(n)].t_end; ++t)
      qb_of[static_cast<size_t>(t)] = n;
  c.list_begin.assign(1, 0);
  std::vector<int64_t> blocks;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t g = 0; g < c.Hkv; ++g) {
      cpu_ref::selected_blocks(batch, a.block_idx, qb_of[static_cast<size_t>(t)], shared ? 0 : g, c.Bs, blocks);
      for (const int64_t blk : blocks)
        if (blk * c.Bs <= c.pos[static_cast<size_t>(t)]) c.list.push_back(static_cast<int32_t>(blk));
      c.list_begin.push_back(static_cast<int64_t>(c.list.size()));
    }
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
