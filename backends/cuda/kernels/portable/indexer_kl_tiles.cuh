// The kernels of indexer_kl (indexer_kl.cu describes the passes). A "token row" is one
// (token, selection head) that attended a page's block; its target, logits and logit
// gradients live at buffer row (t - t_lo) * Hs + g, selection entry j (block_idx column,
// or the block when dense), Bs slots per entry; only slots it sees are written or read,
// so slack slots (NaN allowed) never enter a sum.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/portable/product_tiles.cuh"
#include "backends/cuda/kernels/portable/training_index.cuh"
#include "backends/cuda/kernels/portable/training_rows.cuh"

namespace msa::MSA_GPU_NS {

// Dims of Di per CTA of kl_grads_kernel: 64, or 32 when Di <= 32.
inline int kl_dims(int64_t Di) { return Di <= 32 ? 32 : 64; }
inline constexpr int kKlMinBlocks = 4;  // CTAs per SM of the product kernels (4 x 55 KiB at D = 128)

// CTAs sharing one bucket's tiles (tile i goes to split i % splits), from the shape alone
// (the dki_cache sums of kl_grads_kernel follow the splits): enough for about
// kKlTargetCtas CTAs, but at least kKlSplitTiles of the call's `tiles` each. A sink
// block every token selects makes its page's bucket some T / blocks times the average;
// the splits bound its CTAs' share of the call.
inline constexpr int64_t kKlTargetCtas = 16384, kKlSplitTiles = 8;
inline int kl_splits(int64_t ctas, int64_t tiles, int max_splits) {
  if (ctas <= 0) return 1;
  const int64_t want = std::min((kKlTargetCtas + ctas - 1) / ctas, tiles / (ctas * kKlSplitTiles));
  return static_cast<int>(std::clamp<int64_t>(want, 1, max_splits));
}

struct KlParams {
  AttendSets sets;
  const void* qi = nullptr;  // [T][Hs][Di], dtype qi_dt
  const void* ki = nullptr;  // [P][Bs][Di]
  const void* q = nullptr;   // [T][Hq][D], dtype q_dt
  const void* kc = nullptr;  // [P][Hkv][Bs][D]
  const float* lse = nullptr;
  const float* dkl = nullptr;  // null: all ones
  int qi_dt = kF32, q_dt = kF32;
  int Hq = 1, Hkv = 1, G = 1, D = 0, Hs = 1, Di = 0;
  bool shared = false;
  float scale = 1.0f, scale_i = 1.0f;
  float* kl = nullptr;
  float* dqi = nullptr;
  float* dki = nullptr;
  InverseIndex inv;
  int Hb = 1;                                    // inverse-index buckets per page: Hs (sparse) or 1
  int nsel = 0;                                  // selection entries per token row: k, or max_blocks when dense
  int chunks = 1;                                // key chunks of a page: ceil(Bs / kKeysT)
  int dchunks = 1;                               // ceil(Di / kl_dims(Di))
  int splits_t = 1, splits_l = 1, splits_g = 1;  // kl_splits of the target, logit and grads kernels
  int64_t plane = 0;                             // P * Bs * Di
  float* part = nullptr;                         // [splits_g][P][Bs][Di]: each split's dki_cache sums (splits_g > 1)
  // The pass: tokens [t_lo, t_hi); the first stores dki, later ones add to it.
  int t_lo = 0, t_hi = 0;
  bool first = true;
  float* target = nullptr;  // [rows][nsel][Bs]: p, then the logit gradient
  float* logit = nullptr;   // [rows][nsel][Bs]
  float* dpart = nullptr;   // [rows][nsel][chunks][Di]: each key chunk's share of dqi
};

// One token row of a page-outer tile and the keys nv (<= kKeysT) of the CTA's chunk it sees.
struct TokenRow {
  int t, g, j, nv;
};

__device__ __forceinline__ int64_t buffer_row(const KlParams& p, int t, int g) {
  return int64_t{t - p.t_lo} * p.Hs + g;
}
// Element offset of slot 0 of a token row's selection entry in target / logit.
__device__ __forceinline__ int64_t slots_at(const KlParams& p, const TokenRow& r) {
  return (buffer_row(p, r.t, r.g) * p.nsel + r.j) * p.sets.bt.Bs;
}

// A batch of kTileThreads inverse-index positions and their token rows that see slots of
// the chunk starting at slot j0: entry e holds rows [off[e], off[e + 1]), tokens from ta
// (position pos_a) ascending, selection heads innermost (a dense entry serves every head,
// a sparse one its own; only_g >= 0 keeps that head's rows). Tokens outside the pass
// are left out.
struct RowBatch {
  struct Ent {
    int ta, pos_a, c, j, g_lo, heads;
  };
  Ent ent[kTileThreads];
  int off[kTileThreads + 1];
  int scan[kTileThreads / 32 + 2];
};

// Loads positions [base, min(base + kTileThreads, w1)) into b and returns their rows.
// Call with every thread of the block.
__device__ __forceinline__ int load_batch(const KlParams& p, int base, int w1, int j0, int only_g, RowBatch& b) {
  const int w = base + static_cast<int>(threadIdx.x), Bs = p.sets.bt.Bs;
  int rows = 0;
  RowBatch::Ent e{0, 0, 0, 0, 0, 0};
  if (w < w1) {
    const Entry en = p.inv.at(w);
    const bool every = en.hs < 0;
    if (only_g < 0 || every || en.hs == only_g) {
      // The first token past slot j0 of block c: pos >= c * Bs + j0.
      const int ta = max(max(en.t0, p.t_lo), en.t0 + (en.c * Bs + j0 - en.p0)), tb = min(en.t1, p.t_hi);
      e.ta = ta;
      e.pos_a = en.p0 + (ta - en.t0);
      e.c = en.c;
      e.j = p.sets.bidx != nullptr ? static_cast<int>(p.inv.id(w) % p.sets.k) : en.c;
      e.g_lo = only_g >= 0 ? only_g : (every ? 0 : en.hs);
      e.heads = only_g < 0 && every ? p.Hs : 1;
      rows = max(0, tb - ta) * e.heads;
    }
  }
  __syncthreads();  // the previous batch is consumed
  int total = 0;
  const int before = block_excl_scan(rows, b.scan, &total);
  b.ent[threadIdx.x] = e;
  b.off[threadIdx.x] = before;
  if (threadIdx.x == 0) b.off[kTileThreads] = total;
  __syncthreads();
  return total;
}

// rows[r] = row r0 + r of the batch, r < n. Call with every thread of the block (ends with
// a barrier; starts with one, so the previous rows are consumed).
__device__ __forceinline__ void batch_rows(const KlParams& p, const RowBatch& b, int r0, int n, int j0,
                                           TokenRow* rows) {
  __syncthreads();
  for (int r = threadIdx.x; r < n; r += kTileThreads) {
    const int x = r0 + r;
    int lo = 0, hi = kTileThreads - 1;  // the last entry starting at or before x (it holds x)
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (b.off[mid] <= x)
        lo = mid;
      else
        hi = mid - 1;
    }
    const RowBatch::Ent& e = b.ent[lo];
    const int local = x - b.off[lo], tok = local / e.heads;
    rows[r] = TokenRow{e.ta + tok, e.g_lo + local % e.heads, e.j,
                       min(kKeysT, attended_slots(p.sets.bt.Bs, e.pos_a + tok, e.c) - j0)};
  }
  __syncthreads();
}

// fn(n) for this split's tiles (tile i goes to split i % splits) of the token rows of
// inverse-index positions [w0, w1) that see the chunk at j0, with rows[0, n) (n <= cap)
// the tile's rows. Call with every thread of the block.
template <class Fn>
__device__ __forceinline__ void for_each_tile(const KlParams& p, RowBatch& b, TokenRow* rows, int w0, int w1, int j0,
                                              int only_g, int cap, int splits, int split, Fn&& fn) {
  int tile = 0;
  for (int base = w0; base < w1; base += kTileThreads) {
    const int total = load_batch(p, base, w1, j0, only_g, b);
    for (int r0 = 0; r0 < total; r0 += cap, ++tile) {
      if (tile % splits != split) continue;
      const int n = min(cap, total - r0);
      batch_rows(p, b, r0, n, j0, rows);
      fn(n);
    }
  }
}

// Element offset of a token row's qi row.
__device__ __forceinline__ int64_t qi_row(const KlParams& p, const TokenRow& r) {
  return (int64_t{r.t} * p.Hs + r.g) * p.Di;
}

// The most slots of the chunk at j0 that a token row of [w0, w1) sees (0: none): keys past
// it are never staged. Call with every thread of the block.
__device__ __forceinline__ int chunk_reach(const KlParams& p, int w0, int w1, int j0, int only_g, int* s_reach) {
  if (threadIdx.x == 0) *s_reach = 0;
  __syncthreads();
  int r = 0;
  for (int w = w0 + static_cast<int>(threadIdx.x); w < w1; w += kTileThreads) {
    const Entry en = p.inv.at(w);
    if (only_g >= 0 && en.hs >= 0 && en.hs != only_g) continue;
    const int last = min(en.t1, p.t_hi) - 1;
    if (last < max(en.t0, p.t_lo)) continue;
    r = max(r, attended_slots(p.sets.bt.Bs, en.p0 + (last - en.t0), en.c) - j0);
  }
  if (r > 0) atomicMax(s_reach, min(r, kKeysT));
  __syncthreads();
  return *s_reach;
}

// Shared memory of the product kernels: the chunk's keys (B), then the tile's rows (A),
// whose space the target's exp terms E take once the product is formed.
template <int DP>
struct KlTiles {
  static constexpr int S = tile_stride<DP>(), ES = kKeysT + 8;  // E: kg + 16 u and rg + 8 i in distinct banks
  alignas(16) float b[kKeysT * S];
  alignas(16) float a[kRowsT * (S > ES ? S : ES)];
  float lse[kRowsT];
  int lim[kRowsT];
  TokenRow rows[kRowsT];
  RowBatch batch;
  int reach;
};

template <auto Kernel, class Tiles>
int kl_tiles_smem(const Stream& st) {
  constexpr int bytes = static_cast<int>(sizeof(Tiles));
  static_assert(bytes <= 64 * 1024, "the tiles must fit AMD's 64 KiB of LDS");
  allow_smem<Kernel>(bytes, st.props().index);
  return bytes;
}

// grid: P x Hs x chunks x splits_t. The target of selection head g over the chunk's slots: per tile
// the group's query heads of up to kRowsT / G token rows (a head chunk of one token row
// when G > kRowsT) against the KV head's keys, P = exp(scale q.k - lse) (0 past a row's
// slots and for lse = -inf), summed per token row in head order; shared mode repeats the
// tile for every KV head.
template <int DT, int DP>
__global__ void __launch_bounds__(kTileThreads, kKlMinBlocks) kl_target_kernel(KlParams p) {
  extern __shared__ __align__(16) char tiles_mem[];
  KlTiles<DP>& s = *reinterpret_cast<KlTiles<DP>*>(tiles_mem);
  constexpr int ES = KlTiles<DP>::ES;
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.splits_t);
  x /= p.splits_t;
  const int chunk = static_cast<int>(x % p.chunks);
  x /= p.chunks;
  const int g = static_cast<int>(x % p.Hs);
  const int64_t page = x / p.Hs;
  const int Bs = p.sets.bt.Bs, D = p.D, G = p.G, j0 = chunk * kKeysT;
  const int64_t bucket = page * p.Hb + (p.Hb == 1 ? 0 : g);
  const int w0 = p.inv.begin[bucket], w1 = p.inv.begin[bucket + 1];
  const int reach = chunk_reach(p, w0, w1, j0, g, &s.reach);
  if (reach <= 0) return;
  const int nkv = p.shared ? p.Hkv : 1, kh0 = p.shared ? 0 : g;
  const float nh = static_cast<float>(p.shared ? p.Hq : G);
  const int hc = min(G, kRowsT), head_chunks = (G + hc - 1) / hc, per_tile = max(1, kRowsT / G);
  const auto stage_keys_of = [&](int kh) {
    stage_rows<DT, DP, kKeysT>(s.b, p.kc, DT, D, [&](int r) {
      return r < reach ? ((page * p.Hkv + kh) * Bs + j0 + r) * int64_t{D} : int64_t{-1};
    });
  };
  if (nkv == 1) stage_keys_of(kh0);
  const ProductThread th = product_thread();
  for_each_tile(p, s.batch, s.rows, w0, w1, j0, g, per_tile, p.splits_t, split, [&](int n) {
    for (int kv = 0; kv < nkv; ++kv) {
      const int kh = kh0 + kv;
      for (int c = 0; c < head_chunks; ++c) {
        const int h_lo = c * hc, hn = min(hc, G - h_lo), nrows = n * hn;
        const auto head_of = [&](int r) { return kh * G + h_lo + r % hn; };
        __syncthreads();  // the previous E (and keys) are consumed
        if (nkv > 1) stage_keys_of(kh);
        stage_rows<DT, DP, kRowsT>(s.a, p.q, DT, D, [&](int r) {
          return r < nrows ? (int64_t{s.rows[r / hn].t} * p.Hq + head_of(r)) * D : int64_t{-1};
        });
        for (int r = threadIdx.x; r < kRowsT; r += kTileThreads) {
          s.lse[r] = r < nrows ? p.lse[int64_t{s.rows[r / hn].t} * p.Hq + head_of(r)] : -__int_as_float(0x7f800000);
          s.lim[r] = r < nrows ? s.rows[r / hn].nv : 0;
        }
        __syncthreads();
        float sc[4][4];
        product_block<DP>(s.a, s.b, sc);
        __syncthreads();  // A is read: E takes its place
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = th.rg + 8 * i;
          const float l = s.lse[r];
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int k = th.kg + 16 * u;
            s.a[r * ES + k] = k < s.lim[r] && !is_neg_inf(l) ? expf(p.scale * sc[i][u] - l) : 0.0f;
          }
        }
        __syncthreads();
        // Each (token row, key) pair has one owning thread, which keeps the running sum
        // in the target buffer across the tiles of a token row (several only when
        // G > kRowsT or in shared mode).
        const bool first = kv == 0 && c == 0, last = kv == nkv - 1 && c == head_chunks - 1;
        for (int idx = threadIdx.x; idx < n * kKeysT; idx += kTileThreads) {
          const int i = idx / kKeysT, k = idx % kKeysT;
          if (k >= s.rows[i].nv) continue;
          float sum = 0.0f;
          for (int h = 0; h < hn; ++h) sum += s.a[(i * hn + h) * ES + k];
          float* pt = p.target + slots_at(p, s.rows[i]) + j0 + k;
          if (!first) sum = *pt + sum;
          *pt = last ? sum / nh : sum;
        }
      }
    }
  });
}

// grid: P x chunks x splits_l. The student's logits scale_i qi.ki of the chunk's slots for every
// token row of the page (all its buckets), kRowsT rows per tile.
template <int KT, int DP>
__global__ void __launch_bounds__(kTileThreads, kKlMinBlocks) kl_logit_kernel(KlParams p) {
  extern __shared__ __align__(16) char tiles_mem[];
  KlTiles<DP>& s = *reinterpret_cast<KlTiles<DP>*>(tiles_mem);
  const int split = static_cast<int>(blockIdx.x % p.splits_l);
  const int chunk = static_cast<int>(blockIdx.x / p.splits_l % p.chunks);
  const int64_t page = blockIdx.x / p.splits_l / p.chunks;
  const int Bs = p.sets.bt.Bs, Di = p.Di, j0 = chunk * kKeysT;
  const int w0 = p.inv.begin[page * p.Hb], w1 = p.inv.begin[(page + 1) * p.Hb];
  const int reach = chunk_reach(p, w0, w1, j0, -1, &s.reach);
  if (reach <= 0) return;
  stage_rows<KT, DP, kKeysT>(s.b, p.ki, KT, Di,
                             [&](int r) { return r < reach ? (page * Bs + j0 + r) * int64_t{Di} : int64_t{-1}; });
  const ProductThread th = product_thread();
  for_each_tile(p, s.batch, s.rows, w0, w1, j0, -1, kRowsT, p.splits_l, split, [&](int n) {
    stage_rows<kAnyDtype, DP, kRowsT>(s.a, p.qi, p.qi_dt, Di,
                                      [&](int r) { return r < n ? qi_row(p, s.rows[r]) : int64_t{-1}; });
    __syncthreads();
    float sc[4][4];
    product_block<DP>(s.a, s.b, sc);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = th.rg + 8 * i;
      if (r >= n) continue;
      const TokenRow row = s.rows[r];
      float* out = p.logit + slots_at(p, row) + j0;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int k = th.kg + 16 * u;
        if (k < row.nv) out[k] = p.scale_i * sc[i][u];
      }
    }
  });
}

// The target of a token row whose set is one slot (slot 0 of block `page`), its scores
// in f64 with cpu-ref's dot: a head whose lse is that slot's exact score adds exactly 1,
// so the row gets p = 1, kl = 0 and zero gradients exactly where the reference does.
__device__ __forceinline__ float lone_slot_target(const KlParams& p, int t, int g, int64_t page) {
  const int h0 = p.shared ? 0 : g * p.G, nh = p.shared ? p.Hq : p.G;
  double sum = 0.0;
  for (int h = h0; h < h0 + nh; ++h) {
    const float l = p.lse[int64_t{t} * p.Hq + h];
    if (is_neg_inf(l)) continue;
    const int64_t qo = (int64_t{t} * p.Hq + h) * p.D, ko = (page * p.Hkv + h / p.G) * p.sets.bt.Bs * int64_t{p.D};
    const auto term = [&](int d) {
      return static_cast<double>(load_any(p.q, p.q_dt, qo + d)) * static_cast<double>(load_any(p.kc, p.q_dt, ko + d));
    };
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int d = 0;
    for (; d + 4 <= p.D; d += 4) {
      s0 += term(d);
      s1 += term(d + 1);
      s2 += term(d + 2);
      s3 += term(d + 3);
    }
    for (; d < p.D; ++d) s0 += term(d);
    // The exponent in f64; expf of it is exactly 1 where the f64 exp is (f64 exp would
    // make ptxas spill registers in the rows kernel).
    sum += static_cast<double>(
        expf(static_cast<float>(static_cast<double>(p.scale) * ((s0 + s1) + (s2 + s3)) - static_cast<double>(l))));
  }
  return static_cast<float>(sum / nh);
}

// Token row `row` of the pass: its token, selection head, block_idx row and token sets.
struct PassRow {
  int t, g, sel;
  TokenAt tk;
};
__device__ __forceinline__ PassRow pass_row(const KlParams& p, int64_t row) {
  PassRow r;
  r.t = p.t_lo + static_cast<int>(row / p.Hs);
  r.g = static_cast<int>(row % p.Hs);
  r.sel = p.sets.Hs == 1 ? 0 : r.g;
  r.tk = find_token(p.sets, r.t);
  return r;
}

// grid: the pass's token rows. The student's logsumexp over the row's slots, kl, and the
// logit gradient dkl * scale_i * (u - p) of each slot in place of p.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) kl_rows_kernel(KlParams p) {
  __shared__ float s_red[kThreads / kWarp + 1];
  const int64_t row = blockIdx.x;
  const PassRow pr = pass_row(p, row);
  const int t = pr.t, g = pr.g, sel = pr.sel, Bs = p.sets.bt.Bs;
  const TokenAt& tk = pr.tk;
  const float* lg = p.logit + row * p.nsel * Bs;
  float* tg = p.target + row * p.nsel * Bs;
  const int64_t out = int64_t{t} * p.Hs + g;
  int n = 0;
  float m = -__int_as_float(0x7f800000);
  for_each_attended_at(p.sets, tk, sel, [&](int j, int, int64_t, int slots) {
    for (int i = threadIdx.x; i < slots; i += kThreads) m = fmaxf(m, lg[int64_t{j} * Bs + i]);
    n += slots;
  });
  if (n == 0) {  // empty set: kl 0, no gradient
    if (threadIdx.x == 0) p.kl[out] = 0.0f;
    return;
  }
  m = block_max(m, s_red);
  float sum = 0.0f;
  for_each_attended_at(p.sets, tk, sel, [&](int j, int, int64_t, int slots) {
    for (int i = threadIdx.x; i < slots; i += kThreads) sum += expf(lg[int64_t{j} * Bs + i] - m);
  });
  const float lse_u = m + logf(block_sum(sum, s_red));
  if (n == 1) {
    if (threadIdx.x == 0)
      for_each_attended_at(p.sets, tk, sel, [&](int j, int, int64_t page, int) {
        tg[int64_t{j} * Bs] = lone_slot_target(p, t, g, page);
      });
    __syncthreads();
  }
  const float wgt = (p.dkl != nullptr ? p.dkl[out] : 1.0f) * p.scale_i;
  float kl = 0.0f;
  for_each_attended_at(p.sets, tk, sel, [&](int j, int, int64_t, int slots) {
    for (int i = threadIdx.x; i < slots; i += kThreads) {
      const int64_t at = int64_t{j} * Bs + i;
      const float pt = tg[at], lu = lg[at] - lse_u;
      if (pt != 0.0f) kl += pt * (logf(pt) - lu);  // 0 log 0 = 0
      tg[at] = wgt * (expf(lu) - pt);
    }
  });
  kl = block_sum(kl, s_red);
  if (threadIdx.x == 0) p.kl[out] = kl;
}

// Shared memory of kl_grads_kernel: the chunk's indexer keys and the tile's qi rows (KD
// dims of Di), and the tile's logit gradients keys x rows.
template <int KD>
struct GradTiles {
  static constexpr int S = tile_stride<KD>(), CS = kRowsT + 1;
  alignas(16) float ki[kKeysT * S];
  alignas(16) float q[kRowsT * S];
  float ct[kKeysT * CS];
  TokenRow rows[kRowsT];
  RowBatch batch;
  int reach;
};

// v = row[0, N) of shared memory (16-byte aligned for N >= 4, 8-byte for N = 2).
template <int N>
__device__ __forceinline__ void load_row(const float* row, float (&v)[N]) {
  static_assert(N == 2 || N % 4 == 0, "float2 or float4 loads");
  if constexpr (N == 2) {
    const float2 x = *reinterpret_cast<const float2*>(row);
    v[0] = x.x, v[1] = x.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 x = *reinterpret_cast<const float4*>(row + i);
      v[i] = x.x, v[i + 1] = x.y, v[i + 2] = x.z, v[i + 3] = x.w;
    }
  }
}

// grid: P x chunks x dchunks x splits_g. Over its split's tiles of the page's token rows
// (index order, kRowsT rows each): dki_cache += W^T qi for the chunk's keys (W: the rows'
// logit gradients), and each row's share W ki of dqi, stored for kl_dqi_kernel. Every
// CTA writes its dki_cache block (splits_g > 1: its split's plane of part).
template <int KT, int KD>
__global__ void __launch_bounds__(kTileThreads, kKlMinBlocks) kl_grads_kernel(KlParams p) {
  extern __shared__ __align__(16) char tiles_mem[];
  GradTiles<KD>& s = *reinterpret_cast<GradTiles<KD>*>(tiles_mem);
  constexpr int S = GradTiles<KD>::S, CS = GradTiles<KD>::CS;
  constexpr int EK = KD / 8, EQ = KD / 16;  // dims per thread of dki and of the dqi shares
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.splits_g);
  x /= p.splits_g;
  const int dc = static_cast<int>(x % p.dchunks);
  x /= p.dchunks;
  const int chunk = static_cast<int>(x % p.chunks);
  const int64_t page = x / p.chunks;
  const int Bs = p.sets.bt.Bs, Di = p.Di, j0 = chunk * kKeysT, d0 = dc * KD, dn = min(KD, Di - d0);
  const int w0 = p.inv.begin[page * p.Hb], w1 = p.inv.begin[(page + 1) * p.Hb];
  const int reach = chunk_reach(p, w0, w1, j0, -1, &s.reach);
  // dki: keys kq + 16 u, dims dq * EK + e; dqi shares: rows rq + 8 i, dims dg * EQ + e.
  const int kq = threadIdx.x % 16, dq = threadIdx.x / 16, rq = threadIdx.x % 8, dg = threadIdx.x / 8;
  float dk[4][EK] = {};
  if (reach > 0) {
    stage_rows<KT, KD, kKeysT>(
        s.ki, p.ki, KT, dn, [&](int r) { return r < reach ? (page * Bs + j0 + r) * int64_t{Di} + d0 : int64_t{-1}; });
    for_each_tile(p, s.batch, s.rows, w0, w1, j0, -1, kRowsT, p.splits_g, split, [&](int n) {
      stage_rows<kAnyDtype, KD, kRowsT>(s.q, p.qi, p.qi_dt, dn,
                                        [&](int r) { return r < n ? qi_row(p, s.rows[r]) + d0 : int64_t{-1}; });
      for (int i = threadIdx.x; i < kRowsT * kKeysT; i += kTileThreads) {
        const int r = i / kKeysT, k = i % kKeysT;
        s.ct[k * CS + r] = r < n && k < s.rows[r].nv ? p.target[slots_at(p, s.rows[r]) + j0 + k] : 0.0f;
      }
      __syncthreads();
      for (int r = 0; r < n; ++r) {
        float qv[EK];
        load_row(&s.q[r * S + dq * EK], qv);
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const float c = s.ct[(kq + 16 * u) * CS + r];
#pragma unroll
          for (int e = 0; e < EK; ++e) dk[u][e] = fmaf(c, qv[e], dk[u][e]);
        }
      }
      float dv[4][EQ] = {};
      for (int k = 0; k < reach; ++k) {
        float kv[EQ];
        load_row(&s.ki[k * S + dg * EQ], kv);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float c = s.ct[k * CS + rq + 8 * i];
#pragma unroll
          for (int e = 0; e < EQ; ++e) dv[i][e] = fmaf(c, kv[e], dv[i][e]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = rq + 8 * i;
        if (r >= n) continue;
        const TokenRow row = s.rows[r];
        float* out = p.dpart + ((buffer_row(p, row.t, row.g) * p.nsel + row.j) * p.chunks + chunk) * Di + d0;
#pragma unroll
        for (int e = 0; e < EQ; ++e)
          if (dg * EQ + e < dn) out[dg * EQ + e] = dv[i][e];
      }
    });
  }
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const int key = j0 + kq + 16 * u;
    if (key >= Bs) continue;
    const int64_t at = (page * Bs + key) * Di + d0;
    float* out = p.splits_g > 1 ? p.part + split * p.plane + at : p.dki + at;
    const bool add = p.splits_g == 1 && !p.first;
#pragma unroll
    for (int e = 0; e < EK; ++e) {
      const int d = dq * EK + e;
      if (d < dn) out[d] = add ? out[d] + dk[u][e] : dk[u][e];
    }
  }
}

// dki_cache (plus its value from earlier passes) += the splits' sums, in split order.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) kl_dki_merge_kernel(KlParams p) {
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i < p.plane; i += int64_t{gridDim.x} * kThreads) {
    float v = p.first ? 0.0f : p.dki[i];
    for (int sp = 0; sp < p.splits_g; ++sp) v += p.part[sp * p.plane + i];
    p.dki[i] = v;
  }
}

// grid: the pass's token rows. dqi = the row's shares, blocks in block_idx order (dense:
// ascending), key chunks ascending.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) kl_dqi_kernel(KlParams p) {
  const int64_t row = blockIdx.x;
  const PassRow pr = pass_row(p, row);
  for (int d = threadIdx.x; d < p.Di; d += kThreads) {
    float acc = 0.0f;
    for_each_attended_at(p.sets, pr.tk, pr.sel, [&](int j, int, int64_t, int slots) {
      for (int c = 0; c * kKeysT < slots; ++c) acc += p.dpart[((row * p.nsel + j) * p.chunks + c) * p.Di + d];
    });
    p.dqi[(int64_t{pr.t} * p.Hs + pr.g) * p.Di + d] = acc;
  }
}

}  // namespace msa::MSA_GPU_NS
