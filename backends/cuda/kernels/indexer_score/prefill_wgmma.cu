// CUDA-only Hopper tier (sm_90a): indexer_score for prefill on wgmma. Same function and
// the same tiling as prefill_tc.cu (rows = (token, head) pairs of a W-aligned position
// window, W = max(Qb, TM); columns = keys, 128 per step; gridDim.y splits each tile's
// visible blocks; one writer per output entry, plain stores, deterministic), but:
//
// - CTA = two consumer warpgroups + a producer warpgroup. A tile has 256 rows (TM = 256 /
//   Hi tokens); each consumer warpgroup owns kMT = 2 64-row m-tiles: that halves the key
//   traffic from L2 per FLOP against one m-tile and doubles the MMA time per turn against
//   the fixed per-step latencies (H200, 8192 queries at 128K: 2.15 ms vs 2.42 ms with 128
//   rows, which is not built); setmaxnreg moves registers from the producer warpgroup to
//   the consumers.
// - One producer thread loads the Q tile and streams the keys with TMA
//   (cp.async.bulk.tensor, 128-byte swizzle, zero fill past Di and past the tensor) into a
//   kStages ring of 128-key stages, with full/empty mbarriers; the other producer threads
//   write the -inf entries past the causal range meanwhile.
// - Each consumer warpgroup owns kMT 64 x 128 f32 accumulator sets and runs, per step: wait
//   for the stage, wait for its turn (named barrier), issue kMT wgmma m64n128k16 chains
//   (K = Di), hand the turn to the other warpgroup, wait for the chains, release the stage,
//   pooling epilogue. The turns make the two warpgroups ping-pong: one's epilogue runs
//   while the other's chain keeps the tensor pipe busy (prefill_tc's mma.sync warps run
//   both in lockstep and leave the pipe idle ~2/3 of the time, docs/performance.md). Two
//   accumulator sets per warpgroup (issue step i + 1, then the epilogue of step i)
//   compile to serialized wgmma (ptxas C7514/C7518: the conditional issue makes the
//   accumulators loop phis), so the overlap is across warpgroups instead.
// - Per-row pooling state (max, lse sum) lives in registers (a thread owns fixed rows of
//   the wgmma accumulator). At a block's end: Hi = 4 with Qb <= 4 reduces over tokens in
//   registers (a warp's 16 rows are 4 tokens x 4 heads) and stores directly; otherwise the
//   row scores go through shared memory and a named barrier of the 256 consumer threads,
//   then prefill_tc's shuffle pooling (Qp = min(Qb, TM) tokens; Qp = 64 crosses two warps
//   through shared memory and a second barrier).
//
// Masking as prefill_tc: key s counts for a row iff s <= pos(token); masked logits are
// replaced by -inf (select), so NaN in unused slots or stale shared memory (unmapped pages:
// the stage is not loaded) never reaches a pooled value.
//
// Chosen by choose_indexer_score (choose.cpp) ahead of prefill_tc for prefill-like calls on
// sm_90a with qi and keys bf16 (fp8 keys stay on prefill_tc), Bs a multiple of 128, Di = 64
// or 128, Hi a power of two in [4, 64]; indexer=1 (MSA_CUDA_INDEXER) leaves them to prefill_tc.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "backends/cuda/kernels/common/hopper_ptx.cuh"
#include "backends/cuda/kernels/indexer_score/max_nan.cuh"
#include "backends/cuda/kernels/indexer_score/prefill.h"
#include "backends/cuda/kernels/indexer_score/prefill_layout.h"
#include "backends/cuda/kernels/indexer_score/prefill_tile.cuh"
#include "backends/cuda/kernels/indexer_score/tensor_map.h"
#include "backends/cuda/kernels/portable/indexer_batch.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "hal/op_id.h"

namespace msa::cuda {
namespace {

// kConsumers, kThreads, kMT, kRows, kChunk, kStages, kMaxSpan, Layout (prefill_layout.h).
using namespace indexer_wg;
constexpr int kMinSpan = 16;  // fewest KV blocks worth a CTA of their own
constexpr float kLn2 = 0.69314718055994531f, kLog2e = 1.4426950408889634f;

struct WgIndexerParams {
  Batch bt;
  float* out = nullptr;  // [NQ][Hi][max_blocks]
  int Qb = 1;
  int64_t NQ = 0;
  int Hi = 4, logHi = 2;
  int TM = 32, logTM = 5;  // token slots per tile: rows / Hi
  int W = 32;              // tile window in positions: max(Qb, TM)
  int nsplit = 1;
  float base = 1.0f;  // logit = dot * base: scale_i, times log2(e) for lse
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// mbarrier arrival by the threads where `pred` holds, without a branch.
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, bool pred) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(bar),
               "r"(static_cast<int>(pred))
               : "memory");
}
// Named barriers of the 256 consumer threads: 1 = both warpgroups (row-score exchange);
// 2 and 3 = the turns of warpgroups 0 and 1 on the tensor pipe (ping-pong).
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory"); }
__device__ __forceinline__ void named_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(kConsumers) : "memory");
}
__device__ __forceinline__ void named_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "n"(kConsumers) : "memory");
}

__device__ __forceinline__ void pool_merge(float& m, float& e, float m2, float e2) {
  const float ninf = -FLT_MAX * 2.0f;
  const float mx = max_nan(m, m2);
  if (mx != ninf) e = (m == ninf ? 0.0f : e * exp2f(m - mx)) + (m2 == ninf ? 0.0f : e2 * exp2f(m2 - mx));
  m = mx;
}

// Issues the wgmma chains of one step (K = NP * 64) into acc[mt]: A = the warpgroup's
// m-tile mt (64 Q rows from a_base), B = the stage's 128 keys, both K-major 128-byte
// swizzled; one commit group.
template <int NP>
__device__ __forceinline__ void issue_step(float (&acc)[kMT][64], uint32_t a_base, uint32_t b_base) {
  hopper::wgmma_fence();
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int kk = 0; kk < NP * 4; ++kk) {
      const uint32_t off = (kk % 4) * 32;  // k16 slice inside the 64-column panel kk / 4
      const uint64_t da = hopper::desc_kmajor_sw128(a_base + mt * 64 * 128 + (kk / 4) * (Layout<NP>::PANEL_Q) + off);
      const uint64_t db = hopper::desc_kmajor_sw128(b_base + (kk / 4) * (kChunk * 128) + off);
      hopper::wgmma_ss<kBF16, 128>(acc[mt], da, db, kk > 0);
    }
  hopper::wgmma_commit();
}

// Row partials of one step: max of the valid logits of each of the thread's two rows
// (lse: and the sum of exp2(logit - max)), reduced over the quad sharing the row.
// nv[hh]: keys 0 .. nv - 1 of the step are valid for row hh. SCALE_EACH: base <= 0, so
// scale before the max.
template <bool FULL, bool LSE, bool SCALE_EACH>
__device__ __forceinline__ void step_partials(const float (&acc)[64], const int (&nv)[2], float base, int q,
                                              float (&m_out)[2], float (&s_out)[2]) {
  const float ninf = -FLT_MAX * 2.0f;
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    auto logit = [&](int j, int e) {  // (scaled when SCALE_EACH) logit or -inf when masked
      float x = acc[4 * j + 2 * hh + e];
      if constexpr (SCALE_EACH) x *= base;
      if constexpr (!FULL) x = (8 * j + 2 * q + e < nv[hh]) ? x : ninf;
      return x;
    };
    float m = ninf;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) m = max_nan(m, logit(j, e));
    m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 2));
    float s = 0.0f;
    if constexpr (LSE) {
      const float ms = m == ninf ? 0.0f : (SCALE_EACH ? m : m * base);
      const float b = SCALE_EACH ? 1.0f : base;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) s += exp2f(fmaf(logit(j, e), b, -ms));
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
    }
    if constexpr (!SCALE_EACH) m *= base;  // base > 0: -inf stays -inf
    m_out[hh] = m;
    s_out[hh] = s;
  }
}

template <int NP, bool LSE, bool SCALE_EACH>
__global__ void __launch_bounds__(kThreads, 1)
    indexer_wgmma_kernel(const __grid_constant__ CUtensorMap tmap_q, const __grid_constant__ CUtensorMap tmap_k,
                         const WgIndexerParams p) {
#if MSA_HOPPER_PTX
  using L = Layout<NP>;
  constexpr int NR = 2 * kMT;  // accumulator rows per thread
  extern __shared__ char smem_raw[];
  char* const smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);  // 1024-aligned (swizzle atoms)
  const uint32_t sb_addr = smem_u32(smem);
  const float ninf = -FLT_MAX * 2.0f;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // No cache_batch here, and the tile broadcast within the warp: ptxas keeps the wgmma
  // chains asynchronous only when it can tell the loops around them are warp-uniform (with
  // cache_batch + locate_tile it reported C7518 and serialized every wgmma).
  TileLoc tl = locate_tile(p.bt, p.W, p.Qb, blockIdx.x, p.NQ, blockIdx.x == 0 && blockIdx.y == 0);
  tl.b = __shfl_sync(0xffffffffu, tl.b, 0);
  tl.t0 = __shfl_sync(0xffffffffu, tl.t0, 0);
  tl.p0 = __shfl_sync(0xffffffffu, tl.p0, 0);
  tl.p1 = __shfl_sync(0xffffffffu, tl.p1, 0);
  tl.kv = __shfl_sync(0xffffffffu, tl.kv, 0);
  tl.qb0 = __shfl_sync(0xffffffffu, tl.qb0, 0);
  if (tl.b < 0) return;

  const int Bs = p.bt.Bs, MB = p.bt.max_blocks, Hi = p.Hi, TM = p.TM, Qb = p.Qb;
  const int nvis = min((tl.kv + Bs - 1) / Bs, tl.p1 / Bs + 1);
  const int y = blockIdx.y, ns = p.nsplit;
  const int ns_eff = max(1, min(ns, nvis / kMinSpan));
  int cb = 0, ce = 0;
  if (y < ns_eff) {
    cb = static_cast<int>(int64_t{nvis} * y / ns_eff);
    ce = static_cast<int>(int64_t{nvis} * (y + 1) / ns_eff);
  }
  const int ntail = MB - nvis;
  const int tb = nvis + static_cast<int>(int64_t{ntail} * y / ns);
  const int te = nvis + static_cast<int>(int64_t{ntail} * (y + 1) / ns);
  const int nqb = tl.p1 / Qb - tl.p0 / Qb + 1;
  const int sb0 = tl.p0 / TM * TM;
  const int clast0 = min(tl.p1, sb0 + TM - 1) / Bs;

  // -inf for every (query block, head) of the tile at blocks [c0, c1), coalesced along c.
  // 32-bit math (no 64-bit division calls: they made ptxas serialize the wgmma chains).
  auto fill = [&](int c0, int c1, int first, int stride) {
    const int n = c1 - c0;
    if (n <= 0) return;
    const int total = nqb * Hi * n;  // nqb * Hi <= 2 * rows, n <= max_blocks
    for (int i = first; i < total; i += stride) {
      const int rh = i / n;
      const int64_t qb = tl.qb0 + rh / Hi;
      if (qb < p.NQ) p.out[(qb * Hi + rh % Hi) * int64_t{MB} + c0 + (i - rh * n)] = ninf;
    }
  };
  if (cb >= ce) {  // nothing visible to compute here
    fill(tb, te, tid, kThreads);
    return;
  }
  fill(max(cb, clast0 + 1), ce, tid, kThreads);  // only later sub-tiles (Qb > TM) see these: they max into them
  int32_t* const s_page = reinterpret_cast<int32_t*>(smem + L::PAGE_OFF);
  float* const s_sc = reinterpret_cast<float*>(smem + L::SC_OFF);
  for (int i = tid; i < ce - cb; i += kThreads) s_page[i] = static_cast<int32_t>(page_of(p.bt, tl.b, cb + i));
  const uint32_t bar_full = sb_addr + L::BAR_OFF, bar_empty = bar_full + kStages * 8;
  const uint32_t bar_qfull = bar_empty + kStages * 8, bar_qempty = bar_qfull + 8;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      hopper::mbar_init(bar_full + 8 * s, 1);
      hopper::mbar_init(bar_empty + 8 * s, kConsumers / 32);  // one arrival per consumer warp
    }
    hopper::mbar_init(bar_qfull, 1);
    hopper::mbar_init(bar_qempty, kConsumers / 32);
    hopper::fence_mbar_init();
  }
  __syncthreads();

  // ---- producer: thread 0 of the last warpgroup ---------------------------------------------
  if (warp >= kConsumers / 32) {
    // 128 accumulators per consumer thread: the producer warpgroup gives most of its
    // registers to the consumers (384 threads launch with 168 each).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid != kConsumers) {  // the other producer threads write the -inf tail meanwhile
      fill(tb, te, tid - kConsumers - 1, 127);
      return;
    }
    int u = 0, gstep = 0;
    for (int sb = sb0; sb <= tl.p1; sb += TM) {
      const int plo = max(tl.p0, sb), phi = min(tl.p1, sb + TM - 1);
      const int c_end = min(ce, phi / Bs + 1);
      if (cb >= c_end) continue;
      const int tt0 = plo - sb;
      const int t_first = tl.t0 + (plo - tl.p0);
      const int k_stop = min(c_end * Bs, phi + 1);
      const int nch = (k_stop - cb * Bs + kChunk - 1) / kChunk;
      if (u > 0) hopper::mbar_wait(bar_qempty, (u - 1) & 1);
      hopper::mbar_arrive_expect_tx(bar_qfull, NP * L::PANEL_Q);
      const int row0 = (t_first - tt0) * Hi;  // qi row of token slot 0 (may be < 0: zero fill)
#pragma unroll
      for (int pn = 0; pn < NP; ++pn)
        hopper::tma_load_2d(sb_addr + L::Q_OFF + pn * L::PANEL_Q, &tmap_q, pn * 64, row0, bar_qfull);
      int c = cb, off = 0;
      for (int i = 0; i < nch; ++i, ++gstep) {
        const int st = gstep % kStages;
        if (gstep >= kStages) hopper::mbar_wait(bar_empty + 8 * st, ((gstep / kStages) & 1) ^ 1);
        const int pg = s_page[c - cb];
        if (pg >= 0) {
          hopper::mbar_arrive_expect_tx(bar_full + 8 * st, L::STAGE);
#pragma unroll
          for (int pn = 0; pn < NP; ++pn)
            hopper::tma_load_2d(sb_addr + L::K_OFF + st * L::STAGE + pn * L::PANEL_K, &tmap_k, pn * 64, pg * Bs + off,
                                bar_full + 8 * st);
        } else {
          hopper::mbar_arrive(bar_full + 8 * st);  // unmapped block: consumers mask the whole step
        }
        off += kChunk;
        if (off == Bs) {
          off = 0;
          ++c;
        }
      }
      ++u;
    }
    return;
  }

  // ---- consumers ---------------------------------------------------------------------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int wg = warp / 4, w = warp % 4, g = lane / 4, q = lane % 4;
  const uint32_t a_base = sb_addr + L::Q_OFF + wg * kMT * 64 * 128;
  // This thread's accumulator rows: j = 2 mt + hh is row r = 64 (kMT wg + mt) + 16 w + 8 hh + g
  // of the tile, token slot r / Hi.
  int rrow[NR], rslot[NR];
#pragma unroll
  for (int j = 0; j < NR; ++j) {
    rrow[j] = 64 * (kMT * wg + j / 2) + 16 * w + 8 * (j % 2) + g;
    rslot[j] = rrow[j] >> p.logHi;
  }
  const bool reg_pool = Hi == 4 && Qb <= 4;  // token pooling in registers (see the top)
  // Shared-memory pooling roles (as prefill_tc): thread = (head ph, token slot ptt).
  const int ph = tid >> p.logTM, ptt = tid & (TM - 1);
  const bool pactive = ph < Hi;  // warp-uniform: Hi * TM = rows is a multiple of 128
  const int prow = pactive ? ptt * Hi + ph : 0;
  const int Qp = min(Qb, TM);
  float* const s_wmax = reinterpret_cast<float*>(smem + L::WMAX_OFF);

  float acc[kMT][64];
  if (wg == 1) named_arrive(2);  // warpgroup 0 issues first
  int u = 0, gstep = 0, nend = 0, sidx = 0;
  for (int sb = sb0; sb <= tl.p1; sb += TM, ++sidx) {
    const int plo = max(tl.p0, sb), phi = min(tl.p1, sb + TM - 1);
    const int c_end = min(ce, phi / Bs + 1);
    if (cb >= c_end) continue;
    const int tt0 = plo - sb, ntok = phi - plo + 1;
    const int k_begin = cb * Bs;
    const int k_stop = min(c_end * Bs, phi + 1);
    const int nch = (k_stop - k_begin + kChunk - 1) / kChunk;
    int lim[NR];
#pragma unroll
    for (int j = 0; j < NR; ++j) lim[j] = (rslot[j] >= tt0 && rslot[j] < tt0 + ntok) ? sb + rslot[j] : -1;

    hopper::mbar_wait(bar_qfull, u & 1);
    float run_m[NR], run_e[NR];
#pragma unroll
    for (int j = 0; j < NR; ++j) {
      run_m[j] = ninf;
      run_e[j] = 0.0f;
    }
    int c = cb, off = 0;  // block and offset of the current step

    // Step i: wait for its keys and for this warpgroup's turn on the tensor pipe, issue the
    // wgmma chains, hand the turn to the other warpgroup, wait for the result, release the
    // stage, then the epilogue (which overlaps the other warpgroup's chains).
    for (int i = 0; i < nch; ++i) {
      const int g0 = gstep + i, st = g0 % kStages;
      hopper::mbar_wait(bar_full + 8 * st, (g0 / kStages) & 1);
      named_sync(2 + wg);
      issue_step<NP>(acc, a_base, sb_addr + L::K_OFF + st * L::STAGE);
      named_arrive(3 - wg);
      hopper::wgmma_wait<0>();
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) hopper::fence_regs(acc[mt]);
      mbar_arrive_if(bar_empty + 8 * st, lane == 0);          // stage read by this warp
      mbar_arrive_if(bar_qempty, lane == 0 && i + 1 >= nch);  // Q no longer read
      const int k0 = k_begin + i * kChunk;
      const bool pgok = __shfl_sync(0xffffffffu, s_page[c - cb], 0) >= 0;  // warp-uniform
      float m[NR], e[NR];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        float mm[2], ee[2];
        const int lm[2] = {lim[2 * mt], lim[2 * mt + 1]};
        if (pgok && k0 + kChunk - 1 <= plo) {
          step_partials<true, LSE, SCALE_EACH>(acc[mt], lm, p.base, q, mm, ee);
        } else {
          int nv[2];
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) nv[hh] = pgok ? min(max(lm[hh] - k0 + 1, 0), kChunk) : 0;
          step_partials<false, LSE, SCALE_EACH>(acc[mt], nv, p.base, q, mm, ee);
        }
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          m[2 * mt + hh] = mm[hh];
          e[2 * mt + hh] = ee[hh];
        }
      }
#pragma unroll
      for (int j = 0; j < NR; ++j) {
        if (off == 0) {
          run_m[j] = m[j];
          run_e[j] = e[j];
        } else if constexpr (LSE) {
          pool_merge(run_m[j], run_e[j], m[j], e[j]);
        } else {
          run_m[j] = max_nan(run_m[j], m[j]);
        }
      }
      if (off + kChunk >= Bs || k0 + kChunk >= k_stop) {  // block c is complete
        float v[NR];
#pragma unroll
        for (int j = 0; j < NR; ++j) {
          v[j] = ninf;
          if (lim[j] >= 0) v[j] = LSE ? (run_m[j] == ninf ? ninf : (run_m[j] + log2f(run_e[j])) * kLn2) : run_m[j];
        }
        if (reg_pool) {
          // Row slots: bit 0 = g >> 2 (lane bit 4), bit 1 = hh; head = g & 3.
          if (Qb >= 2) {
#pragma unroll
            for (int j = 0; j < NR; ++j) v[j] = max_nan(v[j], __shfl_xor_sync(0xffffffffu, v[j], 16));
          }
          if (Qb >= 4) {
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) v[2 * mt] = v[2 * mt + 1] = max_nan(v[2 * mt], v[2 * mt + 1]);
          }
          if (q == 0 && (Qb == 1 || (g >> 2) == 0)) {
#pragma unroll
            for (int j = 0; j < NR; ++j) {
              if (Qb >= 4 && (j % 2) != 0) continue;
              const int s0 = rslot[j] & ~(Qb - 1);  // first slot of the query block
              if (s0 < tt0 + ntok && s0 + Qb > tt0) {
                const int64_t qb = tl.qb0 + (sb + s0) / Qb - tl.p0 / Qb;
                if (qb < p.NQ) p.out[(qb * Hi + (g & 3)) * int64_t{MB} + c] = v[j];
              }
            }
          }
        } else {
          float* const sc = s_sc + (nend & 1) * kRows;
          if (q == 0) {
#pragma unroll
            for (int j = 0; j < NR; ++j) sc[rrow[j]] = v[j];
          }
          consumers_sync();
          float vv = sc[prow];
#pragma unroll
          for (int d = 1; d < 32; d <<= 1)
            if (d < Qp) vv = max_nan(vv, __shfl_xor_sync(0xffffffffu, vv, d));
          if (Qp > 32) {  // a query block spans Qp / 32 warps (TM = 64: one head per two warps)
            float* const wm = s_wmax + (nend & 1) * 8;
            if (lane == 0) wm[warp] = vv;
            consumers_sync();
            if ((ptt & (Qp - 1)) == 0)
              for (int x = 1; x < Qp / 32; ++x) vv = max_nan(vv, wm[warp + x]);
          }
          if (pactive) {
            if ((ptt & (Qp - 1)) == 0 && ptt < tt0 + ntok && ptt + Qp > tt0) {
              const int64_t qb = tl.qb0 + (sb + ptt) / Qb - tl.p0 / Qb;
              if (qb < p.NQ) {
                float* o = p.out + (qb * Hi + ph) * int64_t{MB} + c;
                if (sidx > 0) vv = max_nan(*o, vv);  // Qb > TM: an earlier sub-tile of this query block
                *o = vv;
              }
            }
          }
          ++nend;
        }
      }
      off += kChunk;
      if (off == Bs) {
        off = 0;
        ++c;
      }
    }
    gstep += nch;
    ++u;
  }
  if (wg == 0) named_sync(2);  // the last turn handed to warpgroup 0 (balances barrier 2)
#else
  __trap();
#endif
}

template <int NP, bool LSE, bool SCALE_EACH>
void launch(const CUtensorMap& mq, const CUtensorMap& mk, const WgIndexerParams& p, dim3 grid, Stream& st) {
  constexpr int smem = Layout<NP>::BYTES;
  allow_smem<indexer_wgmma_kernel<NP, LSE, SCALE_EACH>>(smem, st.props().index);
  indexer_wgmma_kernel<NP, LSE, SCALE_EACH><<<grid, kThreads, smem, st.native()>>>(mq, mk, p);
}

template <int NP>
void launch_np(const CUtensorMap& mq, const CUtensorMap& mk, const WgIndexerParams& p, bool lse, dim3 grid,
               Stream& st) {
  const bool each = !(p.base > 0.0f);
  if (lse)
    each ? launch<NP, true, true>(mq, mk, p, grid, st) : launch<NP, true, false>(mq, mk, p, grid, st);
  else
    each ? launch<NP, false, true>(mq, mk, p, grid, st) : launch<NP, false, false>(mq, mk, p, grid, st);
}

}  // namespace

void indexer_prefill_wgmma(Stream& st, const ops::IndexerScoreArgs& a, const IndexerShape& sh) {
  WgIndexerParams p;
  p.bt = indexer_batch(st, a);
  p.out = a.block_score.data<float>();
  p.Qb = a.Qb;
  p.NQ = a.NQ;
  p.Hi = static_cast<int>(sh.Hi);
  p.logHi = __builtin_ctz(static_cast<unsigned>(p.Hi));
  p.TM = kRows / p.Hi;
  p.logTM = __builtin_ctz(static_cast<unsigned>(p.TM));
  p.W = std::max(a.Qb, p.TM);
  p.base = a.scale * (sh.lse ? kLog2e : 1.0f);
  const PrefillGrid g = prefill_grid(sh.T, sh.B, sh.NQ, sh.MB, a.Qb, p.TM, st.props().sm_count, kMaxSpan);
  p.nsplit = static_cast<int>(g.nsplit);
  CUtensorMap mq, mk;
  if (!make_map_sw128(&mq, a.qi.data<void>(), sh.T * sh.Hi, static_cast<int>(sh.Di), kRows) ||
      !make_map_sw128(&mk, a.ki_cache.data<void>(), sh.P * sh.Bs, static_cast<int>(sh.Di), kChunk))
    throw Error("cuda: indexer_score: the driver refused the wgmma kernel's tensor maps");
  const dim3 grid(static_cast<unsigned>(g.tiles), static_cast<unsigned>(g.nsplit));
  sh.Di <= 64 ? launch_np<1>(mq, mk, p, sh.lse, grid, st) : launch_np<2>(mq, mk, p, sh.lse, grid, st);
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::cuda
