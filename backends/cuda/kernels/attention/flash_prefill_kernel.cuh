// The device side of flash_prefill.cu, its only includer (the design is described there):
// the block shapes, FaParams, the shared-memory layouts and flash_prefill_kernel. Written
// into flash_prefill.cu's anonymous namespace, as if it stood there.
#pragma once
#include <climits>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/attention/choose.h"
#include "backends/cuda/kernels/common/mma_ptx.cuh"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"

namespace msa::cuda {
namespace {

using attn_geom::kFaBK;      // keys per tile
using attn_geom::kFaMaxQl;   // sparse: local query blocks per block (mask bits)
using attn_geom::kFaMaxSel;  // sparse: (local query block, entry) pairs per block
using attn_geom::kFaRows;    // query rows per block

enum : int { kFaDense = 0, kFaSparse = 1, kFaPatch = 2 };

struct FaParams {
  Batch bt;
  const char* q = nullptr;
  const char* kc = nullptr;  // k_cache (patch: k)
  const char* vc = nullptr;
  int kind = kFaDense;
  int Hq = 1, Hkv = 1, G = 1, D = 0;
  int tpc = 1;         // tokens per block
  int S = 1;           // KV splits
  int tpb = 1;         // tiles per KV block: ceil(Bs / kFaBK)
  int64_t nslots = 0;  // dense/sparse: token-chunk slots
  float scale_log2 = 1.0f;
  AttnOut o;
  // sparse
  const int32_t* bidx = nullptr;  // [NQ][Hs][k]
  int64_t NQ = 0;
  int Qb = 1, k = 0, Hs = 1;
  // patch
  const int4* chunks = nullptr;  // {first token, tokens, window start, window end}
  const int* count = nullptr;
  int H = 1;
};

// Block shape: MT m16 row tiles per warp (1: Q fragments in registers, 8 warps, 6 stages
// (5 tiles in flight: sparse blocks whose tiles serve few warps are load-latency bound),
// 1 block per SM; 2: Q fragments read from shared memory per k-step, 4 warps, 2 stages,
// 2 blocks per SM, and every K/V fragment loaded by ldmatrix serves two MMAs: the
// shared-memory traffic per MMA halves). 128 rows per block either way.
template <int MT>
struct FaShape {
  static constexpr int WARPS = 8 / MT, THREADS = 32 * WARPS;
  static constexpr int STAGES = MT == 1 ? 6 : 2;
  static constexpr int MIN_BLOCKS = MT == 1 ? 1 : 2;
  static_assert(16 * MT * WARPS == kFaRows, "128 rows per block");
};

template <int DP, int MT>
struct FaLayout {
  static constexpr int STAGES = FaShape<MT>::STAGES;
  // Shared rows padded by 16 bytes: 8 consecutive rows at one 16-byte column hit 8
  // distinct 4-bank groups (ldmatrix without conflicts), and every fragment address is
  // a per-lane base plus a constant (no swizzle arithmetic held in registers).
  static constexpr int ROWB = DP * 2 + 16;   // bytes per K/V/Q row (16-bit types)
  static constexpr int TILE = kFaBK * ROWB;  // one K or V tile
  static constexpr int STAGE = 2 * TILE;
  // MT 1: Q is staged in the last stage before the loop; MT 2: Q stays in its own area.
  static constexpr int Q_OFF = MT == 1 ? (STAGES - 1) * STAGE : STAGES * STAGE;
  static constexpr int BYTES = MT == 1 ? STAGES * STAGE : Q_OFF + kFaRows * ROWB;
  static constexpr int OROW = DP + 8;                  // floats per staged output row (conflict-free)
  static constexpr int SEL_BYTES = 3 * kFaMaxSel * 4;  // sparse: blocks, masks, pages
  static_assert(kFaRows * ROWB <= STAGE || MT > 1, "Q staging");
  static_assert(kFaRows * OROW * 4 <= BYTES, "output staging");
  static_assert(kFaMaxSel * 4 <= STAGE, "sparse sort keys (stage 0, before the first copy)");
};

// Validated page id (or -1, flag raised) from a raw block_table value.
__device__ __forceinline__ int fa_page(const Batch& bt, int raw, bool report) {
  if (raw < 0 || raw >= bt.P) {
    if (report) raise_flag(bt.flag, kErrPageId, bt.op);
    return -1;
  }
  return raw;
}

// grid: dense/sparse: nslots x Hkv x S (split fastest, latest chunks first); patch:
// persistent blocks over count x H items.
template <int DT, int DP, int MT>
__global__ void __launch_bounds__(FaShape<MT>::THREADS, FaShape<MT>::MIN_BLOCKS)
    flash_prefill_kernel(const FaParams p) {
  using L = FaLayout<DP, MT>;
  using T = typename Elem<DT>::T;
  constexpr int kThreads = FaShape<MT>::THREADS, kStages = L::STAGES;
  extern __shared__ __align__(128) char smem[];
  __shared__ int64_t s_row_id[kFaRows];
  __shared__ int s_row_lim[kFaRows];  // last visible key position (-1: unused row)
  __shared__ int s_row_ql[kFaRows];   // sparse: local query block of the row
  __shared__ int s_nk[kStages], s_kp[kStages];
  __shared__ unsigned s_msk[kStages];
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  __shared__ int s_nu;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gq = lane >> 2, qd = lane & 3;
  const uint32_t sbase = ptx::smem_u32(smem);
  const float ninf = __int_as_float(0xff800000u);
  const int D = p.D, dsteps = D / 16, dch = D / 8;
  const bool patch = p.kind == kFaPatch, sparse = p.kind == kFaSparse;
  const int Bs = p.bt.Bs;

  Batch bt = p.bt;
  int64_t items = gridDim.x;
  if (!patch) {
    bt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
    if (blockIdx.x == 0 && tid == 0) {  // report bad lengths (and a wrong NQ) once
      int64_t nq = 0;
      for (int b = 0; b < bt.B; ++b) {
        const Seq s = load_seq(bt, b, true);
        nq += s.ok ? seq_qblocks(s, p.Qb) : 0;
      }
      if (sparse && nq != p.NQ) raise_flag(bt.flag, kErrNQ, bt.op);
    }
  } else {
    items = int64_t{*p.count} * p.H;
  }
  int* s_key = reinterpret_cast<int*>(smem);              // sparse sort keys: stage 0, before any copy
  int* s_ublk = reinterpret_cast<int*>(smem + L::BYTES);  // sparse only (dynamic tail)
  unsigned* s_umsk = reinterpret_cast<unsigned*>(s_ublk + kFaMaxSel);
  int* s_upg = reinterpret_cast<int*>(s_umsk + kFaMaxSel);

  // Copy mapping: thread copies 16-byte chunk ch_t of keys key_t + i * KSTEP.
  constexpr int CPR = DP / 8, KSTEP = kThreads / CPR, NCP = kFaBK / KSTEP;
  static_assert(NCP * KSTEP == kFaBK, "copy mapping");
  const int key_t = tid / CPR, ch_t = tid % CPR;
  const bool ch_ok = ch_t < dch;
  const uint32_t soff_t = key_t * L::ROWB + ch_t * 16;

  for (int64_t w = blockIdx.x; w < items; w += gridDim.x) {
    __syncthreads();  // the previous item is done with the row table and shared memory
    int b = 0, g = 0, h = 0, split = 0, kv = 0, max_lim = -1, ntiles_all = 0, ws = 0, we = 0;
    if (!patch) {
      int64_t x = w;
      split = static_cast<int>(x % p.S);
      x /= p.S;
      g = static_cast<int>(x % p.Hkv);
      const int64_t slot = p.nslots - 1 - x / p.Hkv;
      const ChunkLoc loc = locate_chunk(bt, slot, p.tpc);
      if (loc.b < 0) continue;  // uniform
      b = loc.b;
      kv = loc.s.kv;
      const int t_in = loc.chunk * p.tpc;
      const int ntok = min(p.tpc, loc.s.qlen - t_in);
      const int first = loc.s.kv - loc.s.qlen, pos0 = first + t_in;
      max_lim = pos0 + ntok - 1;
      for (int r = tid; r < kFaRows; r += kThreads) {
        const int tl = r / p.G;
        const bool ok = r < p.tpc * p.G && tl < ntok;
        s_row_id[r] = ok ? int64_t{loc.s.q0 + t_in + tl} * p.Hq + g * p.G + r % p.G : -1;
        s_row_lim[r] = ok ? pos0 + tl : -1;
        s_row_ql[r] = ok && sparse ? (pos0 + tl) / p.Qb - pos0 / p.Qb : 0;  // < tpc <= 32
      }
      if (!sparse) {
        ntiles_all = (max_lim / Bs + 1) * p.tpb;
      } else {
        // Union of the selections of this block's query blocks: keys c * 32 + ql, sorted.
        int64_t qb0 = 0;  // query blocks of the sequences before b
        for (int i = 0; i < b; ++i) {
          const Seq s = load_seq(bt, i, false);
          qb0 += s.ok ? seq_qblocks(s, p.Qb) : 0;
        }
        const int qbl0 = pos0 / p.Qb;
        qb0 += qbl0 - first / p.Qb;
        const int nql = max_lim / p.Qb - qbl0 + 1;
        const int nent = nql * p.k;
        int n2 = 1;
        while (n2 < nent) n2 <<= 1;
        const int nblk = min((kv + Bs - 1) / Bs, max_lim / Bs + 1);
        const int hs = p.Hs == 1 ? 0 : g;
        for (int i = tid; i < n2; i += kThreads) {
          int key = INT_MAX;
          if (i < nent) {
            const int ql = i / p.k, j = i - ql * p.k;
            const int64_t qb = qb0 + ql;
            if (qb < p.NQ) {
              const int c = p.bidx[(qb * p.Hs + hs) * int64_t{p.k} + j];
              if (c >= 0 && c < nblk) key = c * kFaMaxQl + ql;  // else: contributes nothing
            }
          }
          s_key[i] = key;
        }
        __syncthreads();
        for (int size = 2; size <= n2; size <<= 1)  // bitonic sort, ascending
          for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = tid; i < (n2 >> 1); i += kThreads) {
              const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
              const int a = s_key[lo], c = s_key[hi];
              if ((a > c) == ((lo & size) == 0)) {
                s_key[lo] = c;
                s_key[hi] = a;
              }
            }
            __syncthreads();
          }
        if (warp == 0) {  // distinct blocks with the OR of their query-block bits
          int base = 0;
          for (int i0 = 0; i0 < n2; i0 += 32) {
            const int i = i0 + lane;
            const int key = i < n2 ? s_key[i] : INT_MAX;
            const int c = key / kFaMaxQl;
            const bool head = key != INT_MAX && (i == 0 || s_key[i - 1] / kFaMaxQl != c);
            unsigned m = 0;
            if (head)
              for (int t = i; t < n2 && s_key[t] != INT_MAX && s_key[t] / kFaMaxQl == c; ++t)
                m |= 1u << (s_key[t] % kFaMaxQl);
            const unsigned bal = __ballot_sync(0xffffffffu, head);
            const int at = base + __popc(bal & ((1u << lane) - 1u));
            if (head) {
              s_ublk[at] = c;
              s_umsk[at] = m;
            }
            base += __popc(bal);
          }
          if (lane == 0) s_nu = base;
        }
        __syncthreads();
        const int nu = s_nu;
        for (int j = tid; j < nu; j += kThreads)
          s_upg[j] = fa_page(bt, bt.block_table[int64_t{b} * bt.max_blocks + s_ublk[j]], true);
        ntiles_all = nu * p.tpb;
      }
    } else {
      const int4 ch = p.chunks[w / p.H];
      h = static_cast<int>(w % p.H);
      ws = ch.z;
      we = ch.w;
      max_lim = we - 1;
      for (int r = tid; r < kFaRows; r += kThreads) {
        const bool ok = r < ch.y;
        s_row_id[r] = ok ? int64_t{ch.x + r} * p.H + h : -1;
        s_row_lim[r] = ok ? we - 1 : -1;  // bidirectional inside the window
        s_row_ql[r] = 0;
      }
      ntiles_all = (we - ws + kFaBK - 1) / kFaBK;
    }
    __syncthreads();  // row table (and sparse pages) visible; sort keys no longer needed

    const int per = (ntiles_all + p.S - 1) / p.S;
    const int u0 = min(ntiles_all, split * per), nt = min(ntiles_all, u0 + per) - u0;
    const int32_t* bt_row = bt.block_table + int64_t{b} * bt.max_blocks;
    auto raw_of = [&](int iu) -> int {  // dense: raw page of tile iu (prefetched a tile ahead)
      return (p.kind == kFaDense && iu < nt) ? __ldg(bt_row + (u0 + iu) / p.tpb) : 0;
    };
    auto issue = [&](int iu, int raw) {
      if (iu < nt) {
        const int u = u0 + iu;
        int kpos0, nk;
        bool ok;
        unsigned msk = 0xffffffffu;
        const char* kg;
        if (patch) {
          kpos0 = ws + u * kFaBK;
          nk = min(kFaBK, we - kpos0);
          ok = nk > 0;
          kg = p.kc + (int64_t{kpos0} * p.H + h) * D * 2;
        } else {
          const int j = u / p.tpb, part = u - j * p.tpb;
          int c, pg;
          if (sparse) {
            c = s_ublk[j];
            pg = s_upg[j];
            msk = s_umsk[j];
          } else {
            c = j;
            pg = fa_page(bt, raw, tid == 0);
          }
          kpos0 = c * Bs + part * kFaBK;
          nk = min(kFaBK, min(Bs - part * kFaBK, kv - kpos0));
          ok = pg >= 0 && nk > 0 && kpos0 <= max_lim;
          kg = p.kc + ((int64_t{pg} * p.Hkv + g) * Bs + part * kFaBK) * (D * 2);
        }
        const int st = iu % kStages;
        if (tid == 0) {
          s_kp[st] = kpos0;
          s_nk[st] = ok ? nk : 0;
          s_msk[st] = msk;
        }
        if (ok && ch_ok) {
          const int rowbytes = (patch ? p.H : 1) * D * 2;  // between keys (< 2^31: H * D small)
          const char* kt = kg + ch_t * 16;                 // key 0 of the tile (always a valid row)
          const char* vt = p.vc + (kt - p.kc);
          const uint32_t ks = sbase + st * L::STAGE + soff_t, vs = ks + L::TILE;
#pragma unroll
          for (int i = 0; i < NCP; ++i) {
            const int j = key_t + i * KSTEP;
            const bool in = j < nk;  // else zero-fill from key 0, nothing read
            const int go = in ? j * rowbytes : 0;
            ptx::cp_async16(ks + i * KSTEP * L::ROWB, kt + go, in ? 16 : 0);
            ptx::cp_async16(vs + i * KSTEP * L::ROWB, vt + go, in ? 16 : 0);
          }
        }
      }
      ptx::cp_async_commit();
    };

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(s, raw_of(s));
    int raw_next = raw_of(kStages - 1);

    // ---- Q rows -> shared; MT 1: then A fragments in registers ----
    {
      char* qs = smem + L::Q_OFF;
      for (int i = tid; i < kFaRows * CPR; i += kThreads) {
        const int r = i / CPR, ch = i % CPR;
        const int64_t id = s_row_id[r];
        uint4 v = make_uint4(0, 0, 0, 0);
        if (id >= 0 && ch < dch) v = ldg16(p.q + id * D * 2 + ch * 16);
        *reinterpret_cast<uint4*>(qs + r * L::ROWB + ch * 16) = v;
      }
    }
    __syncthreads();
    // Lane's ldmatrix row inside a 16-row tile (A fragments: rows 0-7 / 8-15, k 0-7 / 8-15).
    const int qr = (lane & 7) + (((lane >> 3) & 1) << 3);
    const uint32_t qrow = sbase + L::Q_OFF + (warp * 16 * MT + qr) * L::ROWB;
    uint32_t qa[MT == 1 ? DP / 16 : 1][4];
    if constexpr (MT == 1) {
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        const int ch = 2 * kk + (lane >> 4);
        if (kk < dsteps)
          ptx::ldsm_x4(qrow + ch * 16, qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3]);
        else
          qa[kk][0] = qa[kk][1] = qa[kk][2] = qa[kk][3] = 0u;
      }
    }

    // ---- main loop over this split's tiles ----
    const int rbase = warp * 16 * MT + gq;  // this lane's rows: rbase + 16 mt + 8 hh
    const float sl2 = p.scale_log2;
    float m[MT][2], l[MT][2];
    float o[MT][DP / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      m[mt][0] = m[mt][1] = ninf;
      l[mt][0] = l[mt][1] = 0.0f;
#pragma unroll
      for (int n = 0; n < DP / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    }

    // KS keys of a tile at a time for this warp: S = Q K^T, online softmax, O += P V (MT 2
    // takes the 64-key tile in two steps of 32 so S fits the registers beside O). kFull:
    // D == DP (no per-step guards, so the MMA/ldmatrix chain schedules freely). rel: keys
    // j <= rel of the tile are visible to the row; k0: first key of the step.
    constexpr int KS = MT == 1 ? kFaBK : kFaBK / 2;
    auto tile_math = [&](auto full_tag, uint32_t ks, uint32_t vs, const int(&rel)[MT][2], bool need_mask, int k0) {
      constexpr bool kFull = decltype(full_tag)::value;
      // S = Q K^T (16 MT rows x KS keys per warp)
      float sc[MT][KS / 8][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int n = 0; n < KS / 8; ++n) sc[mt][n][0] = sc[mt][n][1] = sc[mt][n][2] = sc[mt][n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        if (kFull || kk < dsteps) {
          uint32_t qf[MT][4];
          if constexpr (MT == 1) {
#pragma unroll
            for (int i = 0; i < 4; ++i) qf[0][i] = qa[kk][i];
          } else {
            const uint32_t qoff = (2 * kk + (lane >> 4)) * 16;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
              ptx::ldsm_x4(qrow + mt * 16 * L::ROWB + qoff, qf[mt][0], qf[mt][1], qf[mt][2], qf[mt][3]);
          }
          const int ch = 2 * kk + ((lane >> 3) & 1);
#pragma unroll
          for (int nb = 0; nb < KS / 16; ++nb) {
            const int key = k0 + nb * 16 + (lane & 7) + ((lane >> 4) << 3);
            uint32_t b0, b1, b2, b3;
            ptx::ldsm_x4(ks + key * L::ROWB + ch * 16, b0, b1, b2, b3);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              ptx::mma16816<DT>(sc[mt][2 * nb], qf[mt], b0, b1);
              ptx::mma16816<DT>(sc[mt][2 * nb + 1], qf[mt], b2, b3);
            }
          }
        }
      }

      // Online softmax (base 2); per row tile: rows gq (e < 2) and gq + 8 (e >= 2).
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float mx0 = ninf, mx1 = ninf;
#pragma unroll
        for (int n = 0; n < KS / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float v = sc[mt][n][e] * sl2;
            // A visible -inf logit becomes NaN: with NaN and +inf ones (exp2(inf - inf))
            // it turns l into NaN, which marks the row (docs/spec.md, "Non-finite inputs").
            if (v == ninf) v = quiet_nan();
            if (need_mask) {
              const int j = k0 + 8 * n + 2 * qd + (e & 1);
              if (j > rel[mt][e >> 1]) v = ninf;
            }
            sc[mt][n][e] = v;
            if (e < 2)
              mx0 = fmaxf(mx0, v);
            else
              mx1 = fmaxf(mx1, v);
          }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m[mt][0], mx0), mn1 = fmaxf(m[mt][1], mx1);
        const float mu0 = mn0 == ninf ? 0.0f : mn0, mu1 = mn1 == ninf ? 0.0f : mn1;  // no inf - inf
        const float a0 = ptx::ex2(m[mt][0] - mu0), a1 = ptx::ex2(m[mt][1] - mu1);    // 0 while m = -inf
        m[mt][0] = mn0;
        m[mt][1] = mn1;
        float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
        for (int n = 0; n < KS / 8; ++n) {
          sc[mt][n][0] = ptx::ex2(sc[mt][n][0] - mu0);
          sc[mt][n][1] = ptx::ex2(sc[mt][n][1] - mu0);
          sc[mt][n][2] = ptx::ex2(sc[mt][n][2] - mu1);
          sc[mt][n][3] = ptx::ex2(sc[mt][n][3] - mu1);
          ps0 += sc[mt][n][0] + sc[mt][n][1];
          ps1 += sc[mt][n][2] + sc[mt][n][3];
        }
        l[mt][0] = l[mt][0] * a0 + ps0;  // NaN stays NaN through every later tile
        l[mt][1] = l[mt][1] * a1 + ps1;
        if (__any_sync(0xffffffffu, a0 != 1.0f || a1 != 1.0f)) {
#pragma unroll
          for (int n = 0; n < DP / 8; ++n) {
            o[mt][n][0] *= a0;
            o[mt][n][1] *= a0;
            o[mt][n][2] *= a1;
            o[mt][n][3] *= a1;
          }
        }
      }

      // O += P V: the S accumulators of keys 16kc..16kc+15 are the A fragment.
#pragma unroll
      for (int kc = 0; kc < KS / 16; ++kc) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          pa[mt][0] = ptx::pack2<DT>(sc[mt][2 * kc][0], sc[mt][2 * kc][1]);
          pa[mt][1] = ptx::pack2<DT>(sc[mt][2 * kc][2], sc[mt][2 * kc][3]);
          pa[mt][2] = ptx::pack2<DT>(sc[mt][2 * kc + 1][0], sc[mt][2 * kc + 1][1]);
          pa[mt][3] = ptx::pack2<DT>(sc[mt][2 * kc + 1][2], sc[mt][2 * kc + 1][3]);
        }
        const int key = k0 + kc * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        const uint32_t vrow = vs + key * L::ROWB;
#pragma unroll
        for (int dp = 0; dp < DP / 16; ++dp) {
          if (kFull || dp < dsteps) {
            const int ch = 2 * dp + (lane >> 4);
            uint32_t v0, v1, v2, v3;
            ptx::ldsm_x4_t(vrow + ch * 16, v0, v1, v2, v3);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
              ptx::mma16816<DT>(o[mt][2 * dp], pa[mt], v0, v1);
              ptx::mma16816<DT>(o[mt][2 * dp + 1], pa[mt], v2, v3);
            }
          }
        }
      }
    };

    for (int it = 0; it < nt; ++it) {
      ptx::cp_async_wait<kStages - 2>();
      __syncthreads();  // tile it landed for every thread; stage (it - 1) % kStages is free
      issue(it + kStages - 1, raw_next);
      raw_next = raw_of(it + kStages);
      const int st = it % kStages;
      const int nk = s_nk[st];
      if (nk == 0) continue;  // uniform: invalid page, or past the causal range
      const int kpos0 = s_kp[st];
      const unsigned msk = s_msk[st];
      // Keys j <= rel of this tile are visible to the row (-1: none).
      int rel[MT][2];
      int rmax = -1, rmin = kFaBK;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = rbase + 16 * mt + 8 * hh;  // row limits from shared: fewer live registers
          rel[mt][hh] = ((msk >> s_row_ql[r]) & 1u) ? min(s_row_lim[r] - kpos0, nk - 1) : -1;
          rmax = max(rmax, rel[mt][hh]);
          rmin = min(rmin, rel[mt][hh]);
        }
      const uint32_t ks = sbase + st * L::STAGE, vs = ks + L::TILE;
#pragma unroll 1
      for (int k0 = 0; k0 < kFaBK; k0 += KS) {
        if (!__any_sync(0xffffffffu, rmax >= k0)) break;  // warp-uniform: no visible key left
        const bool need_mask = __any_sync(0xffffffffu, rmin < k0 + KS - 1);
        if constexpr (MT > 1)
          tile_math(std::true_type{}, ks, vs, rel, need_mask, k0);  // D == DP only
        else if (dsteps == DP / 16)
          tile_math(std::true_type{}, ks, vs, rel, need_mask, k0);
        else
          tile_math(std::false_type{}, ks, vs, rel, need_mask, k0);
      }
    }
    ptx::cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages (and Q): reuse them for the output

    // ---- O / l (staged per warp for coalesced rows) and lse ----
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) ptx::mark_nonfinite_rows(o[mt], l[mt]);  // a non-finite attended value
    const bool split_mode = p.S > 1;
    float* ob = reinterpret_cast<float*>(smem) + warp * 16 * MT * L::OROW;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float inv[2];
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        float lt = l[mt][hh];
        lt += __shfl_xor_sync(0xffffffffu, lt, 1);
        lt += __shfl_xor_sync(0xffffffffu, lt, 2);
        inv[hh] = lt != lt ? quiet_nan() : lt > 0.0f ? 1.0f / lt : 0.0f;  // NaN: a non-finite row
        const int64_t id = s_row_id[warp * 16 * MT + mt * 16 + gq + 8 * hh];
        if (qd == 0 && id >= 0) {
          const float lse = lt != lt ? quiet_nan() : lt > 0.0f ? (m[mt][hh] + log2f(lt)) * 0.69314718055994531f : ninf;
          if (split_mode)
            p.o.part_lse[int64_t{split} * p.o.rows_total + id] = lse;
          else
            p.o.lse[id] = lse;
        }
      }
#pragma unroll
      for (int n = 0; n < DP / 8; ++n) {
        if (n < 2 * dsteps) {
          const int d = 8 * n + 2 * qd;
          float* row = ob + (mt * 16 + gq) * L::OROW + d;
          *reinterpret_cast<float2*>(row) = make_float2(o[mt][n][0] * inv[0], o[mt][n][1] * inv[0]);
          *reinterpret_cast<float2*>(row + 8 * L::OROW) = make_float2(o[mt][n][2] * inv[1], o[mt][n][3] * inv[1]);
        }
      }
    }
    __syncwarp();
    constexpr int C4 = DP / 4;  // float4 chunks per staged row
#pragma unroll 4
    for (int i = 0; i < 16 * MT * C4 / 32; ++i) {
      const int idx = lane + 32 * i, r = idx / C4, c4 = idx % C4;
      const int64_t id = s_row_id[warp * 16 * MT + r];
      if (id >= 0 && c4 * 4 < D) {
        const float4 v = *reinterpret_cast<const float4*>(ob + r * L::OROW + c4 * 4);
        if (split_mode) {
          *reinterpret_cast<float4*>(p.o.part_o + (int64_t{split} * p.o.rows_total + id) * D + c4 * 4) = v;
        } else {
          T* out = static_cast<T*>(p.o.out) + id * D + c4 * 4;
          *reinterpret_cast<uint2*>(out) = make_uint2(ptx::pack2<DT>(v.x, v.y), ptx::pack2<DT>(v.z, v.w));
        }
      }
    }
  }
}

}  // namespace
}  // namespace msa::cuda
