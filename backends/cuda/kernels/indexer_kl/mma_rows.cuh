// The rows kernel of the tensor-core indexer_kl, query-outer: each warp owns a tile of 16
// rows (a token's G query heads of its group, 16 / G tokens of one sequence and query
// block: the same selection) and walks the blocks they attend in tiles of kRowKeys keys
// through its own cp.async pipeline (no block-wide barriers), in two passes:
//  1. the student's logsumexp per token (online, over the ki rows alone), and the target
//     of any set of one slot (lone_target); both kept in p.stat for the dki kernel;
//  2. per key tile: the target p (S = Q K^T, exp, column sums), the logits again, the
//     logit gradients (kl_coefs), kl, and dqi += gradient x ki (bf16 mma, f32 registers),
//     written once per run.
// The tiles' K and ki rows past the walked block's valid keys are zero-filled by the copy
// (slack slots are never read); each token masks the keys past its own causal limit.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/indexer_kl/mma.cuh"

namespace msa::cuda::klmma {

// One run of a warp's tile: tokens [ta, tb) of selection head g, the blocks `walk` (the
// run's last token) attends.
template <int DT, int DP>
__device__ __forceinline__ void kl_rows_run(const KlMma& p, char* smem, int (*s_meta)[4], int g, int64_t ta, int64_t tb,
                                            const TokenAt& first, const TokenAt& walk) {
  using L = KlRowLayout<DP>;
  constexpr int CPR = DP / 8;  // 16-byte chunks per row
  constexpr int NS = kRowStages;
  constexpr int ROWB = kRowBytes<DP>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gq = lane >> 2, qd = lane & 3;
  const uint32_t base = ptx::smem_u32(smem) + warp * L::WARP;
  int(*meta)[4] = s_meta + warp * NS;  // per stage: block c, key k0, keys nk (0: none), page
  const int Bs = p.sets.bt.Bs, D = p.D, Di = p.Di, G = p.G;
  const int dsteps = D / 16, isteps = Di / 16, dch = D / 8, ich = Di / 8;
  const int kvh = p.shared ? 0 : g, sel_row = p.sets.Hs == 1 ? 0 : g;
  const float ninf = __int_as_float(0xff800000u);
  const int ntok = static_cast<int>(tb - ta), nrows = ntok * G;

  // ---- this lane's rows gq, gq + 8: token tau, head kvh G + r % G ----
  int tau[2], pos[2];
  int64_t row[2], srow[2];
  bool have[2], tok_ok[2], live[2], lead[2];
  float l2[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = gq + 8 * h;
    tau[h] = r >> p.lg2G;
    have[h] = r < nrows;  // the token is the run's (its outputs are written)
    tok_ok[h] = have[h] && first.b >= 0;
    lead[h] = have[h] && (r & (G - 1)) == 0;
    pos[h] = first.pos + tau[h];
    row[h] = tok_ok[h] ? (ta + tau[h]) * p.Hq + kvh * G + (r & (G - 1)) : int64_t{-1};
    srow[h] = have[h] ? (ta + tau[h]) * p.Hs + g : int64_t{-1};
    const float l = tok_ok[h] ? p.lse[row[h]] : ninf;
    live[h] = tok_ok[h] && l != ninf;  // lse = -inf: the head adds nothing to the target
    l2[h] = live[h] ? l * kLog2e : 0.0f;
  }
  // The student rows (row r: token tau's qi) as A fragments.
  uint32_t ia[DP / 16][4];
  bwd::load_rows_a<DP>(p.qi, tok_ok[0] ? srow[0] : -1, tok_ok[1] ? srow[1] : -1, Di, lane, ia);

  bwd::KeyWalk<kRowKeys> wk(attended_count(p.sets, walk));
  // Tile -> stage st: ki rows (and K rows when with_k) k0 .. k0 + nk - 1 of the block,
  // rows past nk zero-filled (nothing read); columns past D / Di never used, never copied.
  const auto issue = [&](int st, bool with_k) {
    const bool ok = wk.next(p.sets, walk, sel_row, lane);
    const int nk = ok ? min(kRowKeys, wk.slots - wk.k0) : 0;
    if (lane == 0) {
      meta[st][0] = wk.c;
      meta[st][1] = wk.k0;
      meta[st][2] = nk;
      meta[st][3] = static_cast<int>(wk.page);  // a block_table entry
    }
    if (ok) {
      const uint32_t ks = base + st * L::STAGE, is = ks + L::TILE;
      const char* kig = p.ki + (wk.page * Bs + wk.k0) * Di * 2;
      const char* kg = p.kc + ((wk.page * p.Hkv + kvh) * Bs + wk.k0) * D * 2;
#pragma unroll
      for (int i = 0; i < kRowKeys * CPR / 32; ++i) {
        const int f = lane + 32 * i, key = f / CPR, ch = f % CPR;
        const bool in = key < nk;
        if (ch < ich)
          ptx::cp_async16(is + key * ROWB + ch * 16, kig + (in ? int64_t{key} * Di * 2 + ch * 16 : 0), in ? 16 : 0);
        if (with_k && ch < dch)
          ptx::cp_async16(ks + key * ROWB + ch * 16, kg + (in ? int64_t{key} * D * 2 + ch * 16 : 0), in ? 16 : 0);
      }
    }
    ptx::cp_async_commit();
  };
  // Keys j < lim[h] of the tile in stage st are token tau[h]'s.
  const auto token_limits = [&](int c, int k0, int nk, int(&lim)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) lim[h] = tok_ok[h] ? min(attended_slots(Bs, pos[h], c) - k0, nk) : 0;
  };
  // The student logits of the tile's keys (the C layout of S).
  const auto logits = [&](uint32_t is, float(&lg)[2][4]) {
#pragma unroll
    for (int n = 0; n < 2; ++n) lg[n][0] = lg[n][1] = lg[n][2] = lg[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      if (kk < isteps) {
        uint32_t b0, b1, b2, b3;
        ptx::ldsm_x4(bwd::cols_addr<DP>(is, lane, kk), b0, b1, b2, b3);
        ptx::mma16816<kBF16>(lg[0], ia[kk], b0, b1);
        ptx::mma16816<kBF16>(lg[1], ia[kk], b2, b3);
      }
    }
  };

  // ---- pass 1: the student's logsumexp (online per lane, merged over the lane quad) ----
  float m[2] = {ninf, ninf}, s[2] = {0.0f, 0.0f};
  int cnt[2] = {0, 0}, lpage[2] = {0, 0};  // the token's slots; the page of its last slot
#pragma unroll
  for (int st = 0; st < NS - 1; ++st) issue(st, false);
  for (int it = 0;; ++it) {
    ptx::cp_async_wait<NS - 2>();
    __syncwarp();  // tile it landed for every lane; stage (it - 1) % NS is free
    const int st = it % NS;
    const int c = meta[st][0], k0 = meta[st][1], nk = meta[st][2], pg = meta[st][3];
    if (nk == 0) break;  // uniform: the tiles are done
    issue((it + NS - 1) % NS, false);
    int lim[2];
    token_limits(c, k0, nk, lim);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (lim[h] > 0) {
        cnt[h] += lim[h];
        lpage[h] = pg;
      }
    }
    if (!__any_sync(0xffffffffu, lim[0] > 0 || lim[1] > 0)) continue;
    float lg[2][4];
    logits(base + st * L::STAGE + L::TILE, lg);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, j = 8 * n + 2 * qd + (e & 1);
        if (j < lim[h]) {
          const float x = __fmul_rn(lg[n][e], p.scale_i);
          if (x > m[h]) {
            s[h] = s[h] * ptx::ex2((m[h] - x) * kLog2e) + 1.0f;
            m[h] = x;
          } else {
            s[h] += ptx::ex2((x - m[h]) * kLog2e);
          }
        }
      }
    }
  }
  ptx::cp_async_wait<0>();
  __syncwarp();  // every lane is done with the stages before pass 2's copies

  CoefRows cr;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {  // the lanes of a quad hold the same row
      const float mo = __shfl_xor_sync(0xffffffffu, m[h], off), so = __shfl_xor_sync(0xffffffffu, s[h], off);
      const float mn = fmaxf(m[h], mo);
      s[h] = (s[h] > 0.0f ? s[h] * ptx::ex2((m[h] - mn) * kLog2e) : 0.0f) +
             (so > 0.0f ? so * ptx::ex2((mo - mn) * kLog2e) : 0.0f);
      m[h] = mn;
    }
    cr.lse_u[h] = s[h] > 0.0f ? m[h] + logf(s[h]) : ninf;  // one slot: s = 1, lse_u = its logit
    cr.lim[h] = 0;
    cr.lead[h] = lead[h] && tok_ok[h];
    cr.lone[h] = -1.0f;
    cr.w[h] = cr.lead[h] ? (p.dkl != nullptr ? p.dkl[srow[h]] : 1.0f) * p.scale_i : 0.0f;
  }
  // Sets of one slot: their f64 target (the warp, token by token).
  unsigned lone = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (cr.lead[h] && cnt[h] == 1) lone |= 1u << tau[h];
  lone = __reduce_or_sync(0xffffffffu, lone);
  while (lone != 0) {
    const int tk = __ffs(lone) - 1;
    lone &= lone - 1;
    const int r = tk << p.lg2G, src = 4 * (r & 7);  // a lane holding the token's first row
    const int pg = __shfl_sync(0xffffffffu, r >= 8 ? lpage[1] : lpage[0], src);
    const float pl = lone_target<DT>(p, ta + tk, kvh, pg, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (tok_ok[h] && tau[h] == tk) cr.lone[h] = pl;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (cr.lead[h] && qd == 0) p.stat[srow[h]] = make_float2(cr.lse_u[h], cr.lone[h]);

  // ---- pass 2: target, logit gradients, kl, dqi ----
  uint32_t qa[DP / 16][4];
  bwd::load_rows_a<DP>(p.q, row[0], row[1], D, lane, qa);
  // dqi[n][e]: row gq + 8 (e / 2), dim 8 n + 2 qd + e % 2 (m16n8 C layout).
  float dqi[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) dqi[n][0] = dqi[n][1] = dqi[n][2] = dqi[n][3] = 0.0f;
  float kl[2] = {0.0f, 0.0f};
  wk = bwd::KeyWalk<kRowKeys>(attended_count(p.sets, walk));
#pragma unroll
  for (int st = 0; st < NS - 1; ++st) issue(st, true);
  for (int it = 0;; ++it) {
    ptx::cp_async_wait<NS - 2>();
    __syncwarp();
    const int st = it % NS;
    const int c = meta[st][0], k0 = meta[st][1], nk = meta[st][2];
    if (nk == 0) break;
    issue((it + NS - 1) % NS, true);
    token_limits(c, k0, nk, cr.lim);
    if (!__any_sync(0xffffffffu, cr.lim[0] > 0 || cr.lim[1] > 0)) continue;
    const uint32_t ks = base + st * L::STAGE, is = ks + L::TILE;
    // S = Q K^T: sc[n][e] at row gq + 8 (e / 2), key 8 n + 2 qd + e % 2; then P.
    float sc[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      if (kk < dsteps) {
        uint32_t b0, b1, b2, b3;
        ptx::ldsm_x4(bwd::cols_addr<DP>(ks, lane, kk), b0, b1, b2, b3);
        ptx::mma16816<DT>(sc[0], qa[kk], b0, b1);
        ptx::mma16816<DT>(sc[1], qa[kk], b2, b3);
      }
    }
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, j = 8 * n + 2 * qd + (e & 1);
        sc[n][e] = live[h] && j < cr.lim[h] ? ptx::ex2(fmaf(sc[n][e], p.scale_log2, -l2[h])) : 0.0f;
      }
    group_col_sums(sc, G);
    float lg[2][4];
    logits(is, lg);
    uint32_t ca[4];
    kl_coefs<true>(sc, lg, 0, qd, cr, p.inv_nh, p.scale_i, kl, ca);
    bwd::mma_rows<kBF16, DP>(dqi, ca, is, lane, isteps);  // dqi += gradient x ki (the tile's ki rows as k)
  }
  ptx::cp_async_wait<0>();
  __syncwarp();  // every lane is done with the stages before the next run's copies

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    kl[h] += __shfl_xor_sync(0xffffffffu, kl[h], 1);
    kl[h] += __shfl_xor_sync(0xffffffffu, kl[h], 2);
    if (!lead[h]) continue;
    if (qd == 0) p.kl[srow[h]] = kl[h];
    float* out = p.dqi + srow[h] * Di;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      const int d = 8 * n + 2 * qd;
      if (d < Di) *reinterpret_cast<float2*>(out + d) = make_float2(dqi[n][2 * h], dqi[n][2 * h + 1]);
    }
  }
}

// grid: ceil(units / kRowWarps); unit = (selection head g, token tile), g slowest.
template <int DT, int DP>
__global__ void __launch_bounds__(kRowThreads, 2)
    kl_rows_kernel(const KlMma p, int tile_tokens, int64_t tiles, int64_t units, int64_t T) {
  extern __shared__ __align__(128) char smem[];
  __shared__ int s_meta[kRowWarps * kRowStages][4];
  const int64_t unit = int64_t{blockIdx.x} * kRowWarps + (threadIdx.x >> 5);
  if (unit >= units) return;  // warp-uniform; the warps share no barrier
  const int g = static_cast<int>(unit / tiles);
  const int64_t t_first = unit % tiles * tile_tokens, t_end = min(T, t_first + tile_tokens);
  for (int64_t ta = t_first; ta < t_end;) {
    const TokenRun run = token_run(p.sets, ta, t_end);
    kl_rows_run<DT, DP>(p, smem, s_meta, g, ta, run.end, run.first, run.last);
    ta = run.end;
  }
}

}  // namespace msa::cuda::klmma
