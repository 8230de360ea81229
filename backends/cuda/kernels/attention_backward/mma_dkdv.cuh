// dk / dv of the tensor-core paged attention backward, KV-block-outer, deterministic.
//
// Work: a slab is (page, KV head g); its rows are the query rows that attended it, from
// the inverse index (training_index.cuh): the tokens of its bucket's entries in sorted
// order, each token's G heads of group g (row i of a token: head g G + i). A slab's tokens
// are cut into items of p.tpi tokens (at least one item per slab, so every slab is
// written), times p.chunks key chunks of KW keys. Persistent blocks take items in order
// from a counter. Item m of a slab chunk adds its partial sums to those of items
// 0 .. m - 1 once they are in (a release/acquire flag per slab chunk, item 0 stores):
// dk = ((part_0 + part_1) + part_2) .., an order fixed by the index, not by scheduling,
// and no float atomics. An item's predecessor always holds a smaller ticket, so it runs
// (or ran) on a resident block: the wait cannot deadlock.
//
// A block: NW = KW / 16 warps, warp w owns keys 16 w .. 16 w + 15 of the chunk. The chunk's
// K and V rows are staged once per item and kept as B fragments in registers; the item's
// entries (<= kEntChunk) are staged in shared memory, and tiles of 16 query rows are
// gathered by cp.async (q, dout rows; lse, delta) through a kStages pipeline. Per tile and
// warp: S = Q K^T and dP = dout V^T (16 rows x 16 keys, the chain of
// attention_backward_mma.cuh), P = exp(scale S - lse), dS = P (dP - delta), both rounded
// to the input type, transposed in registers (movmatrix) into the A fragments of
// dV += P^T dout and dK += dS^T Q (16 keys x D, f32 in registers).
// Rows past an item's end are zero-filled rows with lse = -inf; keys past a row's causal
// limit, past the chunk (Bs) or of a row with lse = -inf are masked by selection, so slack
// slots (any bits, NaN included) never reach a sum; keys no row attended stay 0.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma.cuh"
#include "backends/cuda/kernels/attention_backward/mma_work.cuh"

namespace msa::cuda::bwd {

// The item a block works on (warp 0 fills it).
struct DkdvItem {
  int ticket;
  int slab, m, chunk;  // slab = page * Hkv + g; m: the item's rank in its slab chunk
  int U0, U1;          // its tokens [U0, U1) of the sorted entries' token prefix
  int wa, nw;          // its entries [wa, wa + nw)
};

// grid: persistent blocks (any number: items are claimed from p.ticket).
template <int DT, int DP, int KW>
__global__ void __launch_bounds__(DkdvLayout<DP, KW>::THREADS, KW == 64 ? 2 : 1) mma_dkdv_kernel(const MmaGrad p) {
  using L = DkdvLayout<DP, KW>;
  constexpr int THREADS = L::THREADS, CPR = L::CPR, RPT = L::RPT;
  extern __shared__ __align__(128) char smem[];
  __shared__ DkdvItem s_item;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, qd = lane & 3;
  const uint32_t sbase = ptx::smem_u32(smem);
  int4* s_ent = reinterpret_cast<int4*>(smem + L::ENT_OFF);
  const int Bs = p.sets.bt.Bs, D = p.D, G = p.G, dsteps = D / 16, dch = D / 8;
  const int n_items = p.item_off[p.S] * p.chunks;
  const float ninf = __int_as_float(0xff800000u);
  const int kb = 16 * warp;  // this warp's first key of the chunk

  for (;;) {
    __syncthreads();  // the previous item is done with shared memory and s_item
    if (warp == 0) {
      const int ticket = claim_ticket(p.ticket, lane);
      if (ticket < n_items) {
        const int ix = ticket / p.chunks;
        const int s = warp_last_le(p.item_off, 0, p.S, ix, lane);
        const int m = ix - __ldcg(p.item_off + s);
        const int page = s / p.Hkv, g = s % p.Hkv;
        const ItemSpan sp = item_span(p.inv, p.tokpre, int64_t{page} * p.Hb + (p.Hb == 1 ? 0 : g), m, p.tpi, lane);
        if (lane == 0) s_item = DkdvItem{ticket, s, m, ticket % p.chunks, sp.U0, sp.U1, sp.wa, sp.nw};
      } else if (lane == 0) {
        s_item.ticket = ticket;
      }
    }
    __syncthreads();
    const DkdvItem it = s_item;
    if (it.ticket >= n_items) break;  // uniform
    const int g = it.slab % p.Hkv;
    const int j0 = it.chunk * KW, nslot = min(KW, Bs - j0);
    const int64_t slab0 = int64_t{it.slab} * Bs * D;  // element offset of the slab's slot 0
    const int rows = (it.U1 - it.U0) * G, ntiles = (rows + 15) / 16;

    // dk[n][e] / dv[n][e]: key kb + gq + 8 (e / 2) of the chunk, dim 8 n + 2 qd + e % 2.
    float dk[DP / 8][4], dv[DP / 8][4];
#pragma unroll
    for (int n = 0; n < DP / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;

    if (ntiles > 0) {
      // The chunk's K / V rows (keys past nslot zero-filled) and the item's entries.
      for (int f = tid; f < KW * CPR; f += THREADS) {
        const int key = f / CPR, ch = f % CPR;
        if (ch < dch) {
          const bool in = key < nslot;
          const int64_t off = in ? (slab0 + int64_t{j0 + key} * D) * 2 + ch * 16 : 0;
          ptx::cp_async16(sbase + L::K_OFF + key * L::ROWB + ch * 16, p.kc + off, in ? 16 : 0);
          ptx::cp_async16(sbase + L::V_OFF + key * L::ROWB + ch * 16, p.vc + off, in ? 16 : 0);
        }
      }
      ptx::cp_async_commit();
      stage_entries<THREADS>(s_ent, p.inv, p.tokpre, it.wa, it.nw);
      ptx::cp_async_wait<0>();
      __syncthreads();

      // The warp's 16 keys as B fragments (columns = keys, cols_addr): per k-step kk,
      // kf[kk][0..1] keys kb + 0..7 and kf[kk][2..3] keys kb + 8..15.
      uint32_t kf[DP / 16][4], vf[DP / 16][4];
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        if (kk < dsteps) {
          ptx::ldsm_x4(cols_addr<DP>(sbase + L::K_OFF + kb * L::ROWB, lane, kk), kf[kk][0], kf[kk][1], kf[kk][2],
                       kf[kk][3]);
          ptx::ldsm_x4(cols_addr<DP>(sbase + L::V_OFF + kb * L::ROWB, lane, kk), vf[kk][0], vf[kk][1], vf[kk][2],
                       vf[kk][3]);
        } else {
          kf[kk][0] = kf[kk][1] = kf[kk][2] = kf[kk][3] = vf[kk][0] = vf[kk][1] = vf[kk][2] = vf[kk][3] = 0u;
        }
      }

      // ---- producer: tile t's rows -> stage t % kStages ----
      // Row s of the item is token U0 + s / G (head g G + s % G); cur[i]: the staged entry
      // holding this thread's row i (rows only grow from tile to tile).
      const int crow = tid / CPR, cch = tid % CPR;
      const bool copier = crow < L::ROW_SLOTS && (RPT > 1 || crow < 16);
      int cur[RPT];
#pragma unroll
      for (int i = 0; i < RPT; ++i) cur[i] = 0;
      const auto issue = [&](int t) {
        if (t < ntiles && copier) {
          const uint32_t st = sbase + L::ST_OFF + (t % kStages) * L::STAGE;
#pragma unroll
          for (int i = 0; i < RPT; ++i) {
            const int r = crow + i * L::ROW_SLOTS, s = 16 * t + r;
            const bool in = s < rows;
            int64_t row = 0;
            int lim = 0;
            if (in) {
              const int u = it.U0 + s / G;
              while (s_ent[cur[i] + 1].w <= u) ++cur[i];
              const int4 en = s_ent[cur[i]];
              const int lt = u - en.w;
              row = int64_t{en.x + lt} * p.Hq + g * G + s % G;
              lim = attended_slots(Bs, en.y + lt, en.z) - j0;
            }
            if (cch < dch) {
              const int64_t off = in ? row * D * 2 + cch * 16 : 0;
              ptx::cp_async16(st + L::Q_AT + r * L::ROWB + cch * 16, p.q + off, in ? 16 : 0);
              ptx::cp_async16(st + L::O_AT + r * L::ROWB + cch * 16, p.dout + off, in ? 16 : 0);
            }
            if (cch == 0) {
              char* sp = smem + L::ST_OFF + (t % kStages) * L::STAGE;
              if (in) {
                ptx::cp_async4(st + L::LSE_AT + r * 4, p.lse + row);
                ptx::cp_async4(st + L::DELTA_AT + r * 4, p.delta + row);
              } else {
                reinterpret_cast<float*>(sp + L::LSE_AT)[r] = ninf;
                reinterpret_cast<float*>(sp + L::DELTA_AT)[r] = 0.0f;
              }
              reinterpret_cast<int*>(sp + L::LIM_AT)[r] = in ? lim : 0;
            }
          }
        }
        ptx::cp_async_commit();
      };
      pipeline_tiles(ntiles, issue, [&](int t) {
        const int sidx = t % kStages;
        const char* sp = smem + L::ST_OFF + sidx * L::STAGE;
        const uint32_t qs = sbase + L::ST_OFF + sidx * L::STAGE + L::Q_AT, os = qs + (L::O_AT - L::Q_AT);
        // This lane's rows gq, gq + 8: keys j < lim[h] of the chunk are theirs.
        int lim[2];
        float l2[2], dl[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = gq + 8 * h;
          const float l = reinterpret_cast<const float*>(sp + L::LSE_AT)[r];
          lim[h] = l == ninf ? 0 : reinterpret_cast<const int*>(sp + L::LIM_AT)[r];
          l2[h] = l == ninf ? 0.0f : l * kLog2e;
          dl[h] = reinterpret_cast<const float*>(sp + L::DELTA_AT)[r];
        }
        if (!__any_sync(0xffffffffu, lim[0] > kb || lim[1] > kb)) return;  // none of the warp's keys

        // S = Q K^T, dP = dout V^T: sc[n][e] / dp[n][e] at row gq + 8 (e / 2), key
        // kb + 8 n + 2 qd + e % 2 (A: the tile's rows, rows_addr; B: kf / vf).
        float sc[2][4], dp[2][4];
#pragma unroll
        for (int n = 0; n < 2; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[n][e] = dp[n][e] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk) {
          if (kk < dsteps) {
            uint32_t a[4];
            ptx::ldsm_x4(rows_addr<DP>(qs, lane, kk), a[0], a[1], a[2], a[3]);
            ptx::mma16816<DT>(sc[0], a, kf[kk][0], kf[kk][1]);
            ptx::mma16816<DT>(sc[1], a, kf[kk][2], kf[kk][3]);
            ptx::ldsm_x4(rows_addr<DP>(os, lane, kk), a[0], a[1], a[2], a[3]);
            ptx::mma16816<DT>(dp[0], a, vf[kk][0], vf[kk][1]);
            ptx::mma16816<DT>(dp[1], a, vf[kk][2], vf[kk][3]);
          }
        }
        // P and dS rounded to DT, packed in the C layout: pa[2 n] rows gq, pa[2 n + 1]
        // rows gq + 8, keys 8 n + 2 qd, +1: the 8x8 blocks (rows 0-7 | 8-15) x (keys 0-7 | 8-15)
        // of the 16 x 16 tile as a0 = (0-7, 0-7), a1 = (8-15, 0-7), a2 = (0-7, 8-15), a3 = (8-15, 8-15).
        uint32_t pa[4], da[4];
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          float pr[4], ds[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e >> 1, j = kb + 8 * n + 2 * qd + (e & 1);
            pr[e] = j < lim[h] ? ptx::ex2(fmaf(sc[n][e], p.scale_log2, -l2[h])) : 0.0f;
            ds[e] = j < lim[h] ? pr[e] * (dp[n][e] - dl[h]) : 0.0f;
          }
          pa[2 * n] = ptx::pack2<DT>(pr[0], pr[1]);
          pa[2 * n + 1] = ptx::pack2<DT>(pr[2], pr[3]);
          da[2 * n] = ptx::pack2<DT>(ds[0], ds[1]);
          da[2 * n + 1] = ptx::pack2<DT>(ds[2], ds[3]);
        }
        // The transposes (keys x rows) as A fragments: block (keys 0-7, rows 0-7) is the
        // transpose of a0, (keys 8-15, rows 0-7) of a2, (keys 0-7, rows 8-15) of a1,
        // (keys 8-15, rows 8-15) of a3.
        const uint32_t pt[4] = {ptx::movmatrix_t(pa[0]), ptx::movmatrix_t(pa[2]), ptx::movmatrix_t(pa[1]),
                                ptx::movmatrix_t(pa[3])};
        const uint32_t dt[4] = {ptx::movmatrix_t(da[0]), ptx::movmatrix_t(da[2]), ptx::movmatrix_t(da[1]),
                                ptx::movmatrix_t(da[3])};
        // dV += P^T dout, dK += dS^T Q (the tile's rows as the k dimension).
        mma_rows<DT, DP>(dv, pt, os, lane, dsteps);
        mma_rows<DT, DP>(dk, dt, qs, lane, dsteps);
      });
    }

    // ---- the ordered hand-off: item m adds to the sums of items 0 .. m - 1 ----
    int* sem = p.sem + int64_t{it.slab} * p.chunks + it.chunk;
    wait_for_items(sem, it.m);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = kb + gq + 8 * h;
      if (key >= nslot) continue;
      const int64_t off = slab0 + int64_t{j0 + key} * D;
#pragma unroll
      for (int n = 0; n < DP / 8; ++n) {
        const int d = 8 * n + 2 * qd;
        if (d >= D) continue;
        float2 k2 = make_float2(dk[n][2 * h] * p.scale, dk[n][2 * h + 1] * p.scale);
        float2 v2 = make_float2(dv[n][2 * h], dv[n][2 * h + 1]);
        if (it.m > 0) {  // the running sum (L2: another block wrote it)
          const float2 kp = __ldcg(reinterpret_cast<const float2*>(p.dk + off + d));
          const float2 vp = __ldcg(reinterpret_cast<const float2*>(p.dv + off + d));
          k2 = make_float2(kp.x + k2.x, kp.y + k2.y);
          v2 = make_float2(vp.x + v2.x, vp.y + v2.y);
        }
        *reinterpret_cast<float2*>(p.dk + off + d) = k2;
        *reinterpret_cast<float2*>(p.dv + off + d) = v2;
      }
    }
    release_item(sem, it.m);
  }
}

}  // namespace msa::cuda::bwd
