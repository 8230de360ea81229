// dq of the tensor-core paged attention backward, query-outer: each warp owns a tile of 16
// query rows that share their selection (the portable dq kernel's DqTiling and runs: at
// Qb = 1 and G = 16 one token's 16 heads, the M of one mma tile), keeps the rows' q and
// dout as A fragments in registers, and streams the K/V rows of their attended blocks,
// kDqKeys at a time, through its own cp.async pipeline (no block-wide barriers: the
// warps of a block are independent), or, when all the block's tiles attend the same
// blocks (dense, or one query block), through one pipeline the block shares. Per key tile: S = Q K^T, dP = dout V^T
// (the chain of attention_backward_mma.cuh), P = exp(scale S - lse), dS = P (dP - delta) rounded to the input type, dq
// += dS K; dq in registers, written once per run (scaled). K/V rows past the tile's valid keys are zero-filled by the
// copy (slack slots are never read); each row masks the keys past its own causal limit and rows whose lse is -inf.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma.cuh"
#include "backends/cuda/kernels/attention_backward/mma_work.cuh"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::cuda::bwd {

// One run of a warp's tile: tokens [ta, tb) (rows: token-major, heads h0 .. h0 + nh - 1),
// the blocks `walk` attends (the run's last token) walked kDqKeys keys at a time. kShared:
// every warp of the block runs this together over the same blocks (`walk`: the block's
// last token) through one pipeline of all its stages, each warp computing its own rows;
// else the warp alone through its own kDqStages stages.
template <int DT, int DP, bool kShared>
__device__ __forceinline__ void dq_run(const MmaGrad& p, char* smem, int (*s_meta)[3], int g, int64_t ta, int64_t tb,
                                       int h0, int nh, const TokenAt& first, const TokenAt& walk) {
  using L = DqLayout<DP>;
  constexpr int CPR = DP / 8;                                     // 16-byte chunks per row
  constexpr int NS = kShared ? kDqWarps * kDqStages : kDqStages;  // stages of the pipeline
  constexpr int NT = kShared ? kDqThreads : 32;                   // its threads
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gq = lane >> 2, qd = lane & 3;
  const int tix = kShared ? static_cast<int>(threadIdx.x) : lane;
  const uint32_t base = ptx::smem_u32(smem) + (kShared ? 0 : warp * L::WARP);
  int(*meta)[3] = kShared ? s_meta : s_meta + warp * kDqStages;  // per stage: block c, key k0, keys nk (0: none)
  const auto sync = [] {
    if constexpr (kShared)
      __syncthreads();
    else
      __syncwarp();
  };
  const int Bs = p.sets.bt.Bs, D = p.D, dsteps = D / 16, dch = D / 8;
  const int sel_row = p.sets.Hs == 1 ? 0 : g;
  const float ninf = __int_as_float(0xff800000u);
  const int nrows = static_cast<int>(tb - ta) * nh;

  // ---- producer: the key tiles (block, k0) of `walk` in selection order ----
  // Every warp of a shared pipeline walks the same entries (the same inputs), so the
  // tiles agree.
  KeyWalk<kDqKeys> wk(attended_count(p.sets, walk));
  // Tile -> stage st: K and V rows k0 .. k0 + nk - 1 of the block's slab, rows past nk
  // zero-filled (nothing read); columns past D are never used, so never copied.
  const auto issue = [&](int st) {
    const bool ok = wk.next(p.sets, walk, sel_row, lane);
    const int nk = ok ? min(kDqKeys, wk.slots - wk.k0) : 0;
    if (tix == 0) {
      meta[st][0] = wk.c;
      meta[st][1] = wk.k0;
      meta[st][2] = nk;
    }
    if (ok) {
      const int64_t key0 = ((wk.page * p.Hkv + g) * Bs + wk.k0) * int64_t{D};
      const char* kg = p.kc + key0 * 2;
      const char* vg = p.vc + key0 * 2;
      const uint32_t ks = base + st * L::STAGE, vs = ks + L::TILE;
#pragma unroll
      for (int i = 0; i < kDqKeys * CPR / NT; ++i) {
        const int f = tix + NT * i, key = f / CPR, ch = f % CPR;
        if (ch < dch) {
          const bool in = key < nk;
          const int64_t off = in ? int64_t{key} * D * 2 + ch * 16 : 0;
          ptx::cp_async16(ks + key * L::ROWB + ch * 16, kg + off, in ? 16 : 0);
          ptx::cp_async16(vs + key * L::ROWB + ch * 16, vg + off, in ? 16 : 0);
        }
      }
    }
    ptx::cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < NS - 1; ++s) issue(s);

  // ---- this lane's rows gq, gq + 8 of the tile: q / dout A fragments, lse, delta ----
  int64_t row[2];
  int pos[2];
  bool live[2];
  float l2[2], dl[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = gq + 8 * h;
    row[h] = r < nrows ? (ta + r / nh) * p.Hq + h0 + r % nh : int64_t{-1};
    pos[h] = first.pos + r / nh;
    const float l = row[h] >= 0 ? p.lse[row[h]] : ninf;
    live[h] = row[h] >= 0 && first.b >= 0 && l != ninf;  // lse = -inf: an empty set, P = 0
    l2[h] = live[h] ? l * kLog2e : 0.0f;
    dl[h] = row[h] >= 0 ? p.delta[row[h]] : 0.0f;
  }
  uint32_t qa[DP / 16][4], oa[DP / 16][4];
  load_rows_a<DP>(p.q, row[0], row[1], D, lane, qa);
  load_rows_a<DP>(p.dout, row[0], row[1], D, lane, oa);

  // dq[n][e]: row gq + 8 (e / 2), dim 8 n + 2 qd + e % 2 (m16n8 C layout).
  float dq[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int it = 0;; ++it) {
    ptx::cp_async_wait<NS - 2>();
    sync();  // tile it landed for every thread; stage (it - 1) % NS is free
    const int st = it % NS;
    const int c = meta[st][0], k0 = meta[st][1], nk = meta[st][2];
    if (nk == 0) break;  // uniform: the tiles are done
    issue((it + NS - 1) % NS);
    // Keys j < lim[h] of this tile are row h's.
    int lim[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) lim[h] = live[h] ? min(attended_slots(Bs, pos[h], c) - k0, nk) : 0;
    if (!__any_sync(0xffffffffu, lim[0] > 0 || lim[1] > 0)) continue;
    const uint32_t ks = base + st * L::STAGE, vs = ks + L::TILE;

    // S = Q K^T and dP = dout V^T: sc[n][e] / dp[n][e] at row gq + 8 (e / 2), key
    // 8 n + 2 qd + e % 2 of the tile (B: the K / V rows as columns, cols_addr).
    float sc[2][4], dp[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[n][e] = dp[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      if (kk < dsteps) {
        uint32_t b0, b1, b2, b3;
        ptx::ldsm_x4(cols_addr<DP>(ks, lane, kk), b0, b1, b2, b3);
        ptx::mma16816<DT>(sc[0], qa[kk], b0, b1);
        ptx::mma16816<DT>(sc[1], qa[kk], b2, b3);
        ptx::ldsm_x4(cols_addr<DP>(vs, lane, kk), b0, b1, b2, b3);
        ptx::mma16816<DT>(dp[0], oa[kk], b0, b1);
        ptx::mma16816<DT>(dp[1], oa[kk], b2, b3);
      }
    }
    // dS (rounded to DT) as the A fragment of dS K: keys 0-7 of rows gq / gq + 8 in
    // a0 / a1, keys 8-15 in a2 / a3 (the C layout of the two n-tiles, packed).
    uint32_t da[4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float ds[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, j = 8 * n + 2 * qd + (e & 1);
        const float pr = j < lim[h] ? ptx::ex2(fmaf(sc[n][e], p.scale_log2, -l2[h])) : 0.0f;
        ds[e] = j < lim[h] ? pr * (dp[n][e] - dl[h]) : 0.0f;
      }
      da[2 * n] = ptx::pack2<DT>(ds[0], ds[1]);
      da[2 * n + 1] = ptx::pack2<DT>(ds[2], ds[3]);
    }
    mma_rows<DT, DP>(dq, da, ks, lane, dsteps);  // dq += dS K (the tile's K rows as k)
  }
  ptx::cp_async_wait<0>();
  sync();  // every thread is done with the stages before the next run's copies

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (row[h] < 0) continue;
    float* out = p.dq + row[h] * D;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      const int d = 8 * n + 2 * qd;
      if (d < D) *reinterpret_cast<float2*>(out + d) = make_float2(dq[n][2 * h] * p.scale, dq[n][2 * h + 1] * p.scale);
    }
  }
}

// grid: ceil(units / kDqWarps); unit = (KV head g, token tile, head chunk), g slowest (the
// blocks running together read one head's K/V, which L2 keeps). A block whose warps' tiles
// are one run each of the same sequence and query block (dense calls, Qb >= 4 tokens)
// shares one pipeline: each K/V tile read serves all its warps.
template <int DT, int DP>
__global__ void __launch_bounds__(kDqThreads, 2)
    mma_dq_kernel(const MmaGrad p, const DqTiling tl, int64_t tiles, int64_t units, int64_t T) {
  extern __shared__ __align__(128) char smem[];
  __shared__ int s_meta[kDqWarps * kDqStages][3];
  __shared__ int s_b[kDqWarps], s_g[kDqWarps], s_walk[3];  // shared mode: each warp's sequence, head; the walk
  __shared__ long long s_qb[kDqWarps], s_walk_qb;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t unit = int64_t{blockIdx.x} * kDqWarps + warp;
  const bool valid = unit < units;
  const int hc = static_cast<int>(unit % tl.head_chunks);
  const int64_t x = unit / tl.head_chunks;
  const int g = static_cast<int>(x / tiles);
  const int64_t t_first = x % tiles * tl.tile_tokens;
  const int64_t t_end = min(T, t_first + tl.tile_tokens);
  const int h0 = g * p.G + hc * tl.tile_heads, nh = min(tl.tile_heads, p.G - hc * tl.tile_heads);

  TokenRun run;
  if (valid) run = token_run(p.sets, t_first, t_end);
  if (lane == 0) {
    const bool one = valid && run.end == t_end && run.first.b >= 0;
    s_b[warp] = one ? run.first.b : -1;
    s_qb[warp] = run.first.qb;
    s_g[warp] = g * tl.head_chunks + hc;
    if (warp == kDqWarps - 1) {
      s_walk[0] = run.last.b;
      s_walk[1] = run.last.pos;
      s_walk[2] = run.last.kv;
      s_walk_qb = run.last.qb;
    }
  }
  __syncthreads();
  bool shared = true;
#pragma unroll
  for (int w = 0; w < kDqWarps; ++w)
    shared = shared && s_b[w] >= 0 && s_b[w] == s_b[0] && s_qb[w] == s_qb[0] && s_g[w] == s_g[0];
  if (shared) {  // uniform: every warp valid
    TokenAt walk;
    walk.b = s_walk[0];
    walk.pos = s_walk[1];
    walk.kv = s_walk[2];
    walk.qb = s_walk_qb;
    dq_run<DT, DP, true>(p, smem, s_meta, g, t_first, t_end, h0, nh, run.first, walk);
    return;
  }
  if (!valid) return;  // warp-uniform; the per-warp runs have no block-wide barrier
  for (int64_t ta = t_first; ta < t_end;) {
    if (ta != t_first) run = token_run(p.sets, ta, t_end);
    dq_run<DT, DP, false>(p, smem, s_meta, g, ta, run.end, h0, nh, run.first, run.last);
    ta = run.end;
  }
}

}  // namespace msa::cuda::bwd
