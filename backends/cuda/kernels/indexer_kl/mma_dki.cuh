// dki_cache of the tensor-core indexer_kl, KV-block-outer, deterministic (the ordered
// items of the attention backward's dk/dv kernel, backward_mma_dkdv.cuh).
//
// Work: a list is (page, selection head g): the tokens of the inverse index's entries
// that attended the page with head g (bucket page * Hb + g; every head's when Hb = 1), in
// sorted order; its rows are each token's G query heads of KV head g (0 when shared). A
// page's chain is its lists in g order, cut into items of p.tpi tokens (list g = 0 has at
// least one item, so every page is written), times p.chunks key chunks of KW keys.
// Persistent blocks take items in order from a counter; item m of a page chunk adds its
// partial sums to those of items 0 .. m - 1 once they are in (a release/acquire flag per
// page chunk, backward_mma_work.cuh): dki = ((part_0 + part_1) + part_2) .., no float
// atomics.
//
// A block: NW = KW / 16 warps, warp w owns keys 16 w .. 16 w + 15 of the chunk. The chunk's
// K rows (KV head of g) and ki rows are staged once per item and kept as B fragments in
// registers; tiles of 16 rows (q rows of each row, the qi row of each token's first row;
// lse, causal limit, the student's logsumexp, lone target and dkl) are gathered by
// cp.async through a kStages pipeline. Per tile and warp: S = Q K^T, P, its column sums,
// the logits (A: the tile's qi rows, each row its token's), the logit gradients
// (kl_coefs) transposed in registers (movmatrix) into the A fragment of
// dki += gradient^T x qi (16 keys x Di, f32 in registers).
// Rows past an item's end are zero rows with lse = -inf and limit 0; keys past a row's
// causal limit or past the chunk (Bs) are masked, so slack slots never reach a sum.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma_dkdv.cuh"
#include "backends/cuda/kernels/indexer_kl/mma.cuh"

namespace msa::cuda::klmma {

// The item a block works on (warp 0 fills it).
struct DkiItem {
  int ticket;
  int page, g, m, chunk;  // m: the item's rank in its page chunk's chain
  int U0, U1;             // its tokens [U0, U1) of the sorted entries' token prefix
  int wa, nw;             // its entries [wa, wa + nw)
};

// grid: persistent blocks (any number: items are claimed from p.ticket).
template <int DT, int DP, int KW>
__global__ void __launch_bounds__(KlDkiLayout<DP, KW>::THREADS, KW == 64 ? 2 : 1) kl_dki_kernel(const KlMma p) {
  using L = KlDkiLayout<DP, KW>;
  constexpr int THREADS = L::THREADS, CPR = L::CPR, RPT = L::RPT;
  extern __shared__ __align__(128) char smem[];
  __shared__ DkiItem s_item;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, qd = lane & 3;
  const uint32_t sbase = ptx::smem_u32(smem);
  int4* s_ent = reinterpret_cast<int4*>(smem + L::ENT_OFF);
  const int Bs = p.sets.bt.Bs, D = p.D, Di = p.Di, G = p.G, gmask = -G;
  const int dsteps = D / 16, isteps = Di / 16, dch = D / 8, ich = Di / 8;
  const int n_items = p.item_off[p.S] * p.chunks;
  const float ninf = __int_as_float(0xff800000u);
  const int kb = 16 * warp;  // this warp's first key of the chunk

  for (;;) {
    __syncthreads();  // the previous item is done with shared memory and s_item
    if (warp == 0) {
      const int ticket = bwd::claim_ticket(p.ticket, lane);
      if (ticket < n_items) {
        const int ix = ticket / p.chunks;
        // The list holding item ix (lists without items share the next one's offset).
        const int s = bwd::warp_last_le(p.item_off, 0, p.S, ix, lane);
        const int page = s / p.Hs, g = s % p.Hs;
        const int m = ix - __ldcg(p.item_off + int64_t{page} * p.Hs), mi = ix - __ldcg(p.item_off + s);
        const bwd::ItemSpan sp =
            bwd::item_span(p.inv, p.tokpre, int64_t{page} * p.Hb + (p.Hb == 1 ? 0 : g), mi, p.tpi, lane);
        if (lane == 0) s_item = DkiItem{ticket, page, g, m, ticket % p.chunks, sp.U0, sp.U1, sp.wa, sp.nw};
      } else if (lane == 0) {
        s_item.ticket = ticket;
      }
    }
    __syncthreads();
    const DkiItem it = s_item;
    if (it.ticket >= n_items) break;  // uniform
    const int g = it.g, kvh = p.shared ? 0 : g;
    const int j0 = it.chunk * KW, nslot = min(KW, Bs - j0);
    const int rows = (it.U1 - it.U0) * G, ntiles = (rows + 15) / 16;

    // dki[n][e]: key kb + gq + 8 (e / 2) of the chunk, dim 8 n + 2 qd + e % 2.
    float dki[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) dki[n][0] = dki[n][1] = dki[n][2] = dki[n][3] = 0.0f;

    if (ntiles > 0) {
      // The chunk's K / ki rows (keys past nslot zero-filled) and the item's entries.
      const int64_t kslab = ((int64_t{it.page} * p.Hkv + kvh) * Bs + j0) * D;
      const int64_t islab = (int64_t{it.page} * Bs + j0) * Di;
      for (int f = tid; f < KW * CPR; f += THREADS) {
        const int key = f / CPR, ch = f % CPR;
        const bool in = key < nslot;
        if (ch < dch)
          ptx::cp_async16(sbase + L::K_OFF + key * L::ROWB + ch * 16,
                          p.kc + (in ? (kslab + int64_t{key} * D) * 2 + ch * 16 : 0), in ? 16 : 0);
        if (ch < ich)
          ptx::cp_async16(sbase + L::KI_OFF + key * L::ROWB + ch * 16,
                          p.ki + (in ? (islab + int64_t{key} * Di) * 2 + ch * 16 : 0), in ? 16 : 0);
      }
      ptx::cp_async_commit();
      bwd::stage_entries<THREADS>(s_ent, p.inv, p.tokpre, it.wa, it.nw);
      ptx::cp_async_wait<0>();
      __syncthreads();

      // The warp's 16 keys as B fragments (columns = keys, cols_addr): per k-step kk,
      // [kk][0..1] keys kb + 0..7 and [kk][2..3] keys kb + 8..15.
      uint32_t kf[DP / 16][4], kif[DP / 16][4];
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        kf[kk][0] = kf[kk][1] = kf[kk][2] = kf[kk][3] = kif[kk][0] = kif[kk][1] = kif[kk][2] = kif[kk][3] = 0u;
        if (kk < dsteps)
          ptx::ldsm_x4(bwd::cols_addr<DP>(sbase + L::K_OFF + kb * L::ROWB, lane, kk), kf[kk][0], kf[kk][1], kf[kk][2],
                       kf[kk][3]);
        if (kk < isteps)
          ptx::ldsm_x4(bwd::cols_addr<DP>(sbase + L::KI_OFF + kb * L::ROWB, lane, kk), kif[kk][0], kif[kk][1],
                       kif[kk][2], kif[kk][3]);
      }

      // ---- producer: tile t's rows -> stage t % kStages ----
      // Row s of the item is token U0 + s / G (head kvh G + s % G); cur[i]: the staged
      // entry holding this thread's row i (rows only grow from tile to tile).
      const int crow = tid / CPR, cch = tid % CPR;
      const bool copier = crow < L::ROW_SLOTS && (RPT > 1 || crow < 16);
      int cur[RPT];
#pragma unroll
      for (int i = 0; i < RPT; ++i) cur[i] = 0;
      const auto issue = [&](int t) {
        if (t < ntiles && copier) {
          const uint32_t st = sbase + L::ST_OFF + (t % kStages) * L::STAGE;
          char* sp = smem + L::ST_OFF + (t % kStages) * L::STAGE;
#pragma unroll
          for (int i = 0; i < RPT; ++i) {
            const int r = crow + i * L::ROW_SLOTS, s = 16 * t + r;
            const bool in = s < rows, first_row = (s & (G - 1)) == 0;
            int64_t row = 0, srow = 0;
            int lim = 0;
            if (in) {
              const int u = it.U0 + (s >> p.lg2G);
              while (s_ent[cur[i] + 1].w <= u) ++cur[i];
              const int4 en = s_ent[cur[i]];
              const int lt = u - en.w, tok = en.x + lt;
              row = int64_t{tok} * p.Hq + kvh * G + (s & (G - 1));
              srow = int64_t{tok} * p.Hs + g;
              lim = attended_slots(Bs, en.y + lt, en.z) - j0;
            }
            if (cch < dch) {
              const int64_t off = in ? row * D * 2 + cch * 16 : 0;
              ptx::cp_async16(st + L::Q_AT + r * L::ROWB + cch * 16, p.q + off, in ? 16 : 0);
            }
            if (first_row && cch < ich) {
              const int64_t off = in ? srow * Di * 2 + cch * 16 : 0;
              ptx::cp_async16(st + L::I_AT + r * L::ROWB + cch * 16, p.qi + off, in ? 16 : 0);
            }
            if (cch == 0) {
              if (in) {
                ptx::cp_async4(st + L::LSE_AT + r * 4, p.lse + row);
                if (first_row) {
                  ptx::cp_async4(st + L::LU_AT + r * 4, &p.stat[srow].x);
                  ptx::cp_async4(st + L::PL_AT + r * 4, &p.stat[srow].y);
                  if (p.dkl != nullptr)
                    ptx::cp_async4(st + L::W_AT + r * 4, p.dkl + srow);
                  else
                    reinterpret_cast<float*>(sp + L::W_AT)[r] = 1.0f;
                }
              } else {
                reinterpret_cast<float*>(sp + L::LSE_AT)[r] = ninf;
              }
              reinterpret_cast<int*>(sp + L::LIM_AT)[r] = in ? lim : 0;
            }
          }
        }
        ptx::cp_async_commit();
      };
      bwd::pipeline_tiles(ntiles, issue, [&](int t) {
        const int sidx = t % kStages;
        const char* sp = smem + L::ST_OFF + sidx * L::STAGE;
        const uint32_t qs = sbase + L::ST_OFF + sidx * L::STAGE + L::Q_AT, is = qs + (L::I_AT - L::Q_AT);
        // This lane's rows gq, gq + 8 (a row past the item's end has limit 0).
        CoefRows cr;
        bool live[2];
        float l2[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = gq + 8 * h;
          const float l = reinterpret_cast<const float*>(sp + L::LSE_AT)[r];
          cr.lim[h] = reinterpret_cast<const int*>(sp + L::LIM_AT)[r];
          cr.lead[h] = (r & (G - 1)) == 0 && cr.lim[h] > 0;
          live[h] = l != ninf;
          l2[h] = live[h] ? l * kLog2e : 0.0f;
          cr.lse_u[h] = cr.lead[h] ? reinterpret_cast<const float*>(sp + L::LU_AT)[r] : 0.0f;
          cr.lone[h] = cr.lead[h] ? reinterpret_cast<const float*>(sp + L::PL_AT)[r] : -1.0f;
          cr.w[h] = cr.lead[h] ? reinterpret_cast<const float*>(sp + L::W_AT)[r] * p.scale_i : 0.0f;
        }
        if (!__any_sync(0xffffffffu, cr.lim[0] > kb || cr.lim[1] > kb)) return;  // none of the warp's keys

        // S = Q K^T: sc[n][e] at row gq + 8 (e / 2), key kb + 8 n + 2 qd + e % 2 (A: the
        // tile's rows, rows_addr; B: kf); then P and its column sums.
        float sc[2][4], lg[2][4];
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[n][e] = lg[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk) {
          if (kk < dsteps) {
            uint32_t a[4];
            ptx::ldsm_x4(bwd::rows_addr<DP>(qs, lane, kk), a[0], a[1], a[2], a[3]);
            ptx::mma16816<DT>(sc[0], a, kf[kk][0], kf[kk][1]);
            ptx::mma16816<DT>(sc[1], a, kf[kk][2], kf[kk][3]);
          }
        }
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1, j = kb + 8 * n + 2 * qd + (e & 1);
            sc[n][e] = live[h] && j < cr.lim[h] ? ptx::ex2(fmaf(sc[n][e], p.scale_log2, -l2[h])) : 0.0f;
          }
        group_col_sums(sc, G);
        // The logits: A = the tile's qi rows (row r reads its token's first row).
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk) {
          if (kk < isteps) {
            uint32_t a[4];
            ptx::ldsm_x4(rep_rows_addr<DP>(is, lane, kk, gmask), a[0], a[1], a[2], a[3]);
            ptx::mma16816<kBF16>(lg[0], a, kif[kk][0], kif[kk][1]);
            ptx::mma16816<kBF16>(lg[1], a, kif[kk][2], kif[kk][3]);
          }
        }
        uint32_t ca[4];
        float unused[2] = {0.0f, 0.0f};
        kl_coefs<false>(sc, lg, kb, qd, cr, p.inv_nh, p.scale_i, unused, ca);
        // The gradients' transpose (keys x rows) as A fragments: block (keys 0-7, rows
        // 0-7) is the transpose of ca[0], (keys 8-15, rows 0-7) of ca[2], (keys 0-7,
        // rows 8-15) of ca[1], (keys 8-15, rows 8-15) of ca[3].
        const uint32_t ct[4] = {ptx::movmatrix_t(ca[0]), ptx::movmatrix_t(ca[2]), ptx::movmatrix_t(ca[1]),
                                ptx::movmatrix_t(ca[3])};
        mma_rep_rows<DP>(dki, ct, is, lane, isteps, gmask);  // dki += gradient^T x qi (the rows as k)
      });
    }

    // ---- the ordered hand-off: item m adds to the sums of items 0 .. m - 1 ----
    int* sem = p.sem + int64_t{it.page} * p.chunks + it.chunk;
    bwd::wait_for_items(sem, it.m);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = kb + gq + 8 * h;
      if (key >= nslot) continue;
      float* out = p.dki + (int64_t{it.page} * Bs + j0 + key) * Di;
#pragma unroll
      for (int n = 0; n < DP / 8; ++n) {
        const int d = 8 * n + 2 * qd;
        if (d >= Di) continue;
        float2 v = make_float2(dki[n][2 * h], dki[n][2 * h + 1]);
        if (it.m > 0) {  // the running sum (L2: another block wrote it)
          const float2 prev = __ldcg(reinterpret_cast<const float2*>(out + d));
          v = make_float2(prev.x + v.x, prev.y + v.y);
        }
        *reinterpret_cast<float2*>(out + d) = v;
      }
    }
    bwd::release_item(sem, it.m);
  }
}

}  // namespace msa::cuda::klmma
