// The device side of kv_outer.cu (its only includer): sparse prefill attention with
// token-level selection (Qb = 1), KV-block-outer.
//
// Work: a slab is (page, KV head g); its rows are the query rows whose token selected it,
// from the inverse index of the selection (training_index.cuh, bucket = page * Hb + head):
// each sorted entry is one token, whose G heads of group g are rows. A slab's tokens are
// cut into items of tpi = 128 / G tokens (128 rows). resolve_items_kernel turns each item
// into a record {slab, first sorted entry, entries, keys attended} and each sorted entry
// into {token, causal limit in the block, partial slot}, one warp per item, all items at
// once: the chain of dependent reads that finds an item (the slab by binary search over
// the item offsets, the bucket's token prefix, the entry ids, the entries) is paid in
// parallel instead of once per item on the attention kernel's critical path.
// The persistent blocks of kv_outer_kernel take contiguous ranges of items, so a slab's
// items (consecutive in the list) run one after another in one block. Per item the
// slab's K and V rows (up to the item's largest causal limit, the rest zero-filled; the
// rows the previous item of the same slab loaded are kept) and its query rows are copied
// to shared memory in two groups (the query rows and the first kBK keys, then the rest,
// which lands during the first key step), while the next item's record and entries are
// fetched into the other half of a double buffer; each of
// the 8 warps runs 16 rows over the block's keys in 64-key steps (S = Q K^T, online
// softmax, O += P V on mma.sync m16n8k16). The result is a partial: O normalised and
// rounded to the input type, and its lse, at the row's slot (token, head, j) for the
// selection entry j that chose the block. kv_outer.cu merges a row's k partials in j
// order (out, lse), so every sum has a fixed order and no float atomics.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention_backward/mma_work.cuh"
#include "backends/cuda/kernels/common/mma_ptx.cuh"

namespace msa::cuda::kvo {

using bwd::item_span;
using bwd::ItemSpan;
using bwd::warp_last_le;

inline constexpr int kRows = 128;  // query rows per item (8 warps x 16)
inline constexpr int kThreads = 256;
inline constexpr int kMaxBs = 128;  // keys a slab holds
inline constexpr int kBK = 64;      // keys per step

// What the kernels read (host: kv_outer.cu). The work fields (sets .. sem) are filled by
// bwd::build_items.
struct KvoParams {
  AttendSets sets;           // the selection; sets.qb_first: the group's first token (Qb = 1)
  const char* q = nullptr;   // [T][Hq][D] bf16/f16 (bytes)
  const char* kc = nullptr;  // [P][Hkv][Bs][D]
  const char* vc = nullptr;
  int Hq = 1, Hkv = 1, G = 1, D = 0, k = 1;
  float scale_log2 = 1.0f;
  char* part_o = nullptr;     // [group tokens][Hq][k][D] input type: normalised partial O
  float* part_lse = nullptr;  // [group tokens][Hq][k]: its lse (-inf: no partial)
  InverseIndex inv;
  int Hb = 1;
  const int* tokpre = nullptr;    // [N + 1]: tokens of the sorted entries before position w
  const int* item_off = nullptr;  // [S + 1]: first item of slab s (S = P * Hkv)
  int S = 0;
  int tpi = 1;
  int* ticket = nullptr;  // (bwd::build_items' ticket and flags: unused here)
  int* sem = nullptr;
  int4* rec = nullptr;  // [items]: {slab, first sorted entry, entries, keys attended} (resolve_items_kernel)
  int4* ent = nullptr;  // [sorted entries]: {token, causal limit in the block, partial slot base, 0}
};

inline constexpr int kResolveThreads = 256;

// One warp per item (grid-stride over the items the offsets count): its record and its
// entries' {token, limit, slot}. A shared selection (Hb = 1) makes a page's entries the
// items of every KV head's slab: the head 0 item writes them.
__global__ void __launch_bounds__(kResolveThreads) resolve_items_kernel(const KvoParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t{gridDim.x} * (kResolveThreads / 32);
  const int n_items = __ldcg(p.item_off + p.S);
  const int Bs = p.sets.bt.Bs, HsK = p.sets.Hs * p.k, HqK = p.Hq * p.k;
  for (int64_t t = (int64_t{blockIdx.x} * kResolveThreads + threadIdx.x) / 32; t < n_items; t += warps) {
    const int ti = static_cast<int>(t);
    const int s = warp_last_le(p.item_off, 0, p.S, ti, lane);
    const int m = ti - __ldcg(p.item_off + s);
    const int page = s / p.Hkv, g = s % p.Hkv;
    const ItemSpan sp = item_span(p.inv, p.tokpre, int64_t{page} * p.Hb + (p.Hb == 1 ? 0 : g), m, p.tpi, lane);
    int nk = 0;
    for (int i = lane; i < sp.nw; i += 32) {
      const int64_t id = p.inv.id(sp.wa + i);
      const Entry en = p.inv.ent[id];
      const int lim = attended_slots(Bs, en.p0, en.c);
      const int qrel = static_cast<int>(id / HsK), j = static_cast<int>(id % p.k);
      if (p.Hb != 1 || g == 0) p.ent[sp.wa + i] = make_int4(en.t0, lim, qrel * HqK + j, 0);
      nk = max(nk, lim);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) nk = max(nk, __shfl_xor_sync(0xffffffffu, nk, o));
    if (lane == 0) p.rec[t] = make_int4(s, sp.wa, sp.nw, nk);
  }
}

// Shared rows padded by 16 bytes (ldmatrix without bank conflicts, as flash_prefill's).
template <int DP>
struct KvoLayout {
  static constexpr int ROWB = DP * 2 + 16;
  static constexpr int K_OFF = 0, V_OFF = kMaxBs * ROWB, Q_OFF = 2 * kMaxBs * ROWB;
  static constexpr int BYTES = Q_OFF + kRows * ROWB;
};

// Item `it`'s record into s_rec and its entries into s_ent by cp.async (committed by the
// caller). Call with every thread.
__device__ __forceinline__ void fetch_item(const KvoParams& p, int it, int4* s_rec, int4* s_ent) {
  const int4 r = __ldcg(p.rec + it);
  for (int i = threadIdx.x; i < r.z; i += kThreads) ptx::cp_async16(ptx::smem_u32(s_ent + i), p.ent + r.y + i, 16);
  if (threadIdx.x == 0) *s_rec = r;
}

// grid: persistent blocks (any number): block b takes items [n b / grid, n (b + 1) / grid).
template <int DT, int DP>
__global__ void __launch_bounds__(kThreads, 2) kv_outer_kernel(const KvoParams p) {
  using L = KvoLayout<DP>;
  extern __shared__ __align__(128) char smem[];
  __shared__ int4 s_rec[3];          // the previous item's record, this item's and the next's
  __shared__ int4 s_ents[2][kRows];  // and their entries {token, limit, slot base, -}
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, qd = lane & 3;
  const uint32_t sbase = ptx::smem_u32(smem);
  const int Bs = p.sets.bt.Bs, D = p.D, G = p.G, dsteps = D / 16, dch = D / 8;
  const int n_items = __ldcg(p.item_off + p.S);
  const float ninf = __int_as_float(0xff800000u);
  constexpr int CPR = DP / 8;  // 16-byte chunks per padded row

  // A contiguous range of items: a slab's items (consecutive in the list) meet in one
  // block, which keeps the slab's K and V rows from one item to the next.
  const int lo = static_cast<int>(int64_t{n_items} * blockIdx.x / gridDim.x);
  const int hi = static_cast<int>(int64_t{n_items} * (blockIdx.x + 1) / gridDim.x);
  if (lo < hi) fetch_item(p, lo, &s_rec[0], s_ents[0]);
  if (tid == 0) s_rec[2] = make_int4(-1, 0, 0, 0);  // no previous item
  ptx::cp_async_commit();
  ptx::cp_async_wait<0>();
  __syncthreads();
  int b = 0, rs = 0;  // entry buffer and record slot of this item
  for (int cur = lo; cur < hi; ++cur, b ^= 1, rs = rs == 2 ? 0 : rs + 1) {
    const int4 rc = s_rec[rs];
    const int4* s_ent = s_ents[b];
    const int g = rc.x % p.Hkv, nw = rc.z, rows = nw * G, nk = rc.w, ntk = (nk + kBK - 1) / kBK;

    // Three copy groups: the query rows with the slab's first kBK K / V rows, the slab's
    // other rows (past nk zero-filled; rows the previous item of the same slab left are
    // kept), the next item's record. The first key step runs while the second group lands.
    const int64_t slab0 = int64_t{rc.x} * Bs * D * 2;
    const int4 prev = s_rec[rs == 0 ? 2 : rs - 1];  // rows [0, prev.w) of slab prev.x are here
    const int kept = prev.x == rc.x ? min(nk, prev.w) : 0;
    const auto copy_kv = [&](int k_lo, int k_hi) {
      for (int f = k_lo * CPR + tid; f < k_hi * CPR; f += kThreads) {
        const int key = f / CPR, ch = f % CPR;
        if (ch < dch) {
          const bool in = key < nk;
          const int64_t off = in ? slab0 + int64_t{key} * D * 2 + ch * 16 : 0;
          ptx::cp_async16(sbase + L::K_OFF + key * L::ROWB + ch * 16, p.kc + off, in ? 16 : 0);
          ptx::cp_async16(sbase + L::V_OFF + key * L::ROWB + ch * 16, p.vc + off, in ? 16 : 0);
        }
      }
    };
    copy_kv(kept, min(kBK, ntk * kBK));
    for (int f = tid; f < kRows * CPR; f += kThreads) {
      const int r = f / CPR, ch = f % CPR;
      if (ch < dch) {
        const bool in = r < rows;
        int64_t off = 0;
        if (in) off = (int64_t{s_ent[r / G].x} * p.Hq + g * G + r % G) * D * 2 + ch * 16;
        ptx::cp_async16(sbase + L::Q_OFF + r * L::ROWB + ch * 16, p.q + off, in ? 16 : 0);
      }
    }
    ptx::cp_async_commit();
    copy_kv(max(kept, kBK), ntk * kBK);
    ptx::cp_async_commit();
    // The next item's record and entries, into the buffer the previous item freed.
    if (cur + 1 < hi) fetch_item(p, cur + 1, &s_rec[rs == 2 ? 0 : rs + 1], s_ents[b ^ 1]);
    ptx::cp_async_commit();
    ptx::cp_async_wait<2>();
    __syncthreads();
    const bool active = 16 * warp < rows;  // warp-uniform
    {
      // This lane's rows r0 = 16 warp + gq and r0 + 8: keys j < lim[h] of the slab are theirs.
      const int r0 = 16 * warp + gq;
      int lim[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) lim[h] = r0 + 8 * h < rows ? s_ent[(r0 + 8 * h) / G].y : 0;
      float m[2] = {ninf, ninf}, l[2] = {0.0f, 0.0f};
      float o[DP / 8][4];
#pragma unroll
      for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
      const int qr = (lane & 7) + (((lane >> 3) & 1) << 3);
      const uint32_t qrow = sbase + L::Q_OFF + (16 * warp + qr) * L::ROWB;
      const float sl2 = p.scale_log2;

#pragma unroll 1
      for (int kt = 0; kt < ntk; ++kt) {  // block-uniform bounds: every warp meets the barrier
        if (kt == 1) {
          ptx::cp_async_wait<1>();  // the slab's other rows
          __syncthreads();
        }
        const int k0 = kt * kBK;
        if (!active || !__any_sync(0xffffffffu, lim[0] > k0 || lim[1] > k0)) continue;
        const bool need_mask = __any_sync(0xffffffffu, lim[0] < k0 + kBK || lim[1] < k0 + kBK);
        float sc[kBK / 8][4];
#pragma unroll
        for (int n = 0; n < kBK / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk) {
          if (kk < dsteps) {
            uint32_t a[4];
            ptx::ldsm_x4(qrow + (2 * kk + (lane >> 4)) * 16, a[0], a[1], a[2], a[3]);
            const int ch = 2 * kk + ((lane >> 3) & 1);
#pragma unroll
            for (int nb = 0; nb < kBK / 16; ++nb) {
              const int key = k0 + nb * 16 + (lane & 7) + ((lane >> 4) << 3);
              uint32_t b0, b1, b2, b3;
              ptx::ldsm_x4(sbase + L::K_OFF + key * L::ROWB + ch * 16, b0, b1, b2, b3);
              ptx::mma16816<DT>(sc[2 * nb], a, b0, b1);
              ptx::mma16816<DT>(sc[2 * nb + 1], a, b2, b3);
            }
          }
        }
        // Online softmax (base 2), as flash_prefill's: rows gq (e < 2) and gq + 8 (e >= 2).
        float mx0 = ninf, mx1 = ninf;
#pragma unroll
        for (int n = 0; n < kBK / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float v = sc[n][e] * sl2;
            if (v == ninf) v = quiet_nan();  // a visible -inf logit marks the row (non-finite rule)
            if (need_mask && k0 + 8 * n + 2 * qd + (e & 1) >= lim[e >> 1]) v = ninf;
            sc[n][e] = v;
            if (e < 2)
              mx0 = fmaxf(mx0, v);
            else
              mx1 = fmaxf(mx1, v);
          }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m[0], mx0), mn1 = fmaxf(m[1], mx1);
        const float mu0 = mn0 == ninf ? 0.0f : mn0, mu1 = mn1 == ninf ? 0.0f : mn1;
        const float a0 = ptx::ex2(m[0] - mu0), a1 = ptx::ex2(m[1] - mu1);
        m[0] = mn0;
        m[1] = mn1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int n = 0; n < kBK / 8; ++n) {
          sc[n][0] = ptx::ex2(sc[n][0] - mu0);
          sc[n][1] = ptx::ex2(sc[n][1] - mu0);
          sc[n][2] = ptx::ex2(sc[n][2] - mu1);
          sc[n][3] = ptx::ex2(sc[n][3] - mu1);
          ps0 += sc[n][0] + sc[n][1];
          ps1 += sc[n][2] + sc[n][3];
        }
        l[0] = l[0] * a0 + ps0;
        l[1] = l[1] * a1 + ps1;
        if (__any_sync(0xffffffffu, a0 != 1.0f || a1 != 1.0f)) {
#pragma unroll
          for (int n = 0; n < DP / 8; ++n) {
            o[n][0] *= a0;
            o[n][1] *= a0;
            o[n][2] *= a1;
            o[n][3] *= a1;
          }
        }
        // O += P V: the S accumulators of keys 16 kc .. 16 kc + 15 are the A fragment.
#pragma unroll
        for (int kc = 0; kc < kBK / 16; ++kc) {
          uint32_t pa[4];
          pa[0] = ptx::pack2<DT>(sc[2 * kc][0], sc[2 * kc][1]);
          pa[1] = ptx::pack2<DT>(sc[2 * kc][2], sc[2 * kc][3]);
          pa[2] = ptx::pack2<DT>(sc[2 * kc + 1][0], sc[2 * kc + 1][1]);
          pa[3] = ptx::pack2<DT>(sc[2 * kc + 1][2], sc[2 * kc + 1][3]);
          const int key = k0 + kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
          const uint32_t vrow = sbase + L::V_OFF + key * L::ROWB;
#pragma unroll
          for (int dp = 0; dp < DP / 16; ++dp) {
            if (dp < dsteps) {
              uint32_t v0, v1, v2, v3;
              ptx::ldsm_x4_t(vrow + (2 * dp + (lane >> 4)) * 16, v0, v1, v2, v3);
              ptx::mma16816<DT>(o[2 * dp], pa, v0, v1);
              ptx::mma16816<DT>(o[2 * dp + 1], pa, v2, v3);
            }
          }
        }
      }

      // ---- the partial: O / l rounded to the input type (staged in the warp's own Q rows,
      // which no other warp reads) and lse, at slot (token, head, j) ----
      if (active) {
        ptx::mark_nonfinite_rows(o, l);
        float inv[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float lt = l[h];
          lt += __shfl_xor_sync(0xffffffffu, lt, 1);
          lt += __shfl_xor_sync(0xffffffffu, lt, 2);
          inv[h] = lt != lt ? quiet_nan() : lt > 0.0f ? 1.0f / lt : 0.0f;
          const int r = r0 + 8 * h;
          if (qd == 0 && r < rows) {
            const float lse = lt != lt ? quiet_nan() : lt > 0.0f ? (m[h] + log2f(lt)) * 0.69314718055994531f : ninf;
            p.part_lse[int64_t{s_ent[r / G].z} + int64_t{g * G + r % G} * p.k] = lse;
          }
        }
        __syncwarp();  // every lane's Q fragment reads are done
        char* stage = smem + L::Q_OFF + 16 * warp * L::ROWB;
#pragma unroll
        for (int n = 0; n < DP / 8; ++n) {
          if (n < 2 * dsteps) {
            const int col = (8 * n + 2 * qd) * 2;
            *reinterpret_cast<uint32_t*>(stage + gq * L::ROWB + col) =
                ptx::pack2<DT>(o[n][0] * inv[0], o[n][1] * inv[0]);
            *reinterpret_cast<uint32_t*>(stage + (gq + 8) * L::ROWB + col) =
                ptx::pack2<DT>(o[n][2] * inv[1], o[n][3] * inv[1]);
          }
        }
        __syncwarp();
        for (int i = lane; i < 16 * dch; i += 32) {
          const int rr = i / dch, ch = i % dch, r = 16 * warp + rr;
          if (r < rows) {
            const int64_t slot = int64_t{s_ent[r / G].z} + int64_t{g * G + r % G} * p.k;
            *reinterpret_cast<uint4*>(p.part_o + slot * D * 2 + ch * 16) =
                *reinterpret_cast<const uint4*>(stage + rr * L::ROWB + ch * 16);
          }
        }
      }  // active
    }
    ptx::cp_async_wait<0>();  // the next item's record
    __syncthreads();          // shared memory and this item's half of the buffer are free
  }
}

}  // namespace msa::cuda::kvo
