// CUDA-only (native tier, sm_80+): indexer_score for prefill on tensor cores. Same function
// as the portable kernel (kernels/portable/indexer_score.cu), computed as a GEMM:
//
//   rows    = (query token, indexer head) pairs of a row tile: TM tokens x Hi heads <= 256
//             (row r = token slot r / Hi, head r % Hi: the rows of qi are contiguous);
//   columns = keys, 128 per pipeline step (one KV block at Bs = 128, two at Bs = 64);
//   K dim   = Di (zero-padded to 64 or 128).
//
// mma.sync m16n8k16 with bf16 (or f16) operands and f32 accumulation; 8 warps as 4 (64 rows)
// x 2 (64 keys), A and B fragments by ldmatrix from padded shared memory (conflict-free).
// Keys go to shared memory with cp.async, double-buffered, once per CTA and step, and serve
// all 256 rows. fp8_e4m3 keys are staged raw and converted in shared memory to the MMA type
// (exact: every e4m3 value is an f16 and a bf16 value). The pooling is fused: per (row,
// KV block) the max (or max + sum of exp2 for lse) over the valid keys, then the maximum
// over the tokens of each query block (shuffles), written once per (query block, head,
// block). Token logits never leave registers.
//
// Tiles: a row tile is the W-aligned position window of one sequence, W = max(Qb, TM), so
// every query block lies inside one tile and one CTA owns each output entry (plain stores,
// deterministic). When Qb > TM the CTA walks the query block's TM-token sub-tiles in order
// and maxes into its own earlier stores. gridDim.y splits each tile's visible blocks into
// ranges (at least kMinSpan blocks each) so that long contexts fill the GPU; the same CTAs
// write -inf into the blocks the tile cannot see.
//
// Masking: key s counts for a row iff s <= pos(token) (which is < kv_len); masked logits are
// replaced by -inf (a select, never a multiply), so NaN in unused cache slots or in
// ki_scale of unused slots stays in its own column and is never selected. Rows of tokens
// outside the tile are zero in shared memory and their results are discarded.
//
// Chosen by choose_indexer_score (choose.cpp) for prefill-like calls (T >= 8 B) with qi
// bf16 (keys bf16 or fp8) or f16 (fp8 keys), Bs = 64 or a multiple of 128; decode, f32 and
// f16 x bf16 keep the portable kernel. H200, 8192 queries at L = 128K, Hi = 4,
// Di = 128: 4.4 ms = 243 TFLOP/s, 28% of the bf16 matmul ceiling; mma.sync with 8 warps
// in lockstep leaves the tensor pipe idle during the pooling epilogue (docs/performance.md).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "backends/cuda/kernels/indexer_score/max_nan.cuh"
#include "backends/cuda/kernels/indexer_score/prefill.h"
#include "backends/cuda/kernels/indexer_score/prefill_layout.h"
#include "backends/cuda/kernels/indexer_score/prefill_tile.cuh"
#include "backends/cuda/kernels/portable/indexer_batch.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "hal/op_id.h"

namespace msa::cuda {
namespace {

using namespace indexer_tc;   // kThreads, kRows, kChunk, kMaxSpan (prefill_layout.h)
constexpr int kMinSpan = 16;  // fewest KV blocks worth a CTA of their own (Q tile: 64 KiB)
constexpr float kLn2 = 0.69314718055994531f, kLog2e = 1.4426950408889634f;

struct TcIndexerParams {
  Batch bt;
  const void* qi = nullptr;         // [T][Hi][Di] bf16|f16
  const void* ki = nullptr;         // [P][Bs][Di] bf16|fp8_e4m3
  const float* ki_scale = nullptr;  // [P][Bs] (fp8 only) or null
  float* out = nullptr;             // [NQ][Hi][max_blocks]
  int Qb = 1;
  int64_t NQ = 0;
  int Hi = 1, Di = 0;
  int TM = 1;         // token slots per row tile: a power of two, TM * Hi <= kRows
  int W = 1;          // tile window in positions: max(Qb, TM)
  int nsplit = 1;     // gridDim.y
  float base = 1.0f;  // logit = dot * base (* ki_scale): scale_i, times log2(e) for lse
  bool cols = false;  // a per-key factor is needed (ki_scale present, or base <= 0)
  bool lse = false;
  bool fp8 = false;
};

template <int DP>
using TcIndexerLayout = Layout<DP>;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void zero16(void* dst) { *static_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0); }

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A B + C (ZERO: C = 0, D written without being read).
template <int MT, bool ZERO>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#define MSA_TC_MMA(TY)                                                           \
  if constexpr (ZERO) {                                                          \
    const float z = 0.0f;                                                        \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY                       \
        ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "                           \
        "{%10,%10,%10,%10};\n"                                                   \
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                         \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(z)); \
  } else {                                                                       \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." TY "." TY                       \
        ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "                           \
        "{%0,%1,%2,%3};\n"                                                       \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                         \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));         \
  }
  if constexpr (MT == kBF16) {
    MSA_TC_MMA("bf16")
  } else {
    MSA_TC_MMA("f16")
  }
#undef MSA_TC_MMA
}

// Two e4m3 keys (low byte first) -> two MMA-type keys, exact (NaN stays NaN).
template <int MT>
__device__ __forceinline__ uint32_t e4m3x2_to_mma(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  if constexpr (MT == kF16) {
    return uint32_t{h.x} | (uint32_t{h.y} << 16);
  } else {
    const float lo = __half2float(__ushort_as_half(h.x)), hi = __half2float(__ushort_as_half(h.y));
    return uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(lo))} |
           (uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(hi))} << 16);
  }
}

// Merges pooled partials (m, e) <- (m, e) + (m2, e2); e is a sum of exp2(l - m) (lse only).
__device__ __forceinline__ void pool_merge(float& m, float& e, float m2, float e2, bool lse) {
  const float ninf = -FLT_MAX * 2.0f;
  const float mx = max_nan(m, m2);
  if (lse && mx != ninf) e = (m == ninf ? 0.0f : e * exp2f(m - mx)) + (m2 == ninf ? 0.0f : e2 * exp2f(m2 - mx));
  m = mx;
}

// A key position as (KV block, offset in the block), advanced without divisions.
struct KPos {
  int c, off;
};
__device__ __forceinline__ KPos kpos_add(KPos a, int d, int Bs) {
  a.off += d;
  while (a.off >= Bs) {
    a.off -= Bs;
    ++a.c;
  }
  return a;
}

// Per-row partials of one warp over its 64 key columns: max of the valid logits and (lse)
// the sum of exp2(logit - max), reduced over the quad that shares a row. FULL: every key
// is visible to every row (no mask). COLS: per-key factor f (else the uniform p.base > 0).
template <bool FULL, bool COLS>
__device__ __forceinline__ void warp_partials(float (&acc)[4][8][4], const float (&f)[8][2], const TcIndexerParams& p,
                                              const int* s_lim, float* pm, float* pe, int row0, int kw0, bool wok,
                                              int g, int tq) {
  const float ninf = -FLT_MAX * 2.0f;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = row0 + mt * 16 + hh * 8 + g;
      int nv = 64;
      if constexpr (!FULL) nv = wok ? min(max(s_lim[row] - kw0 + 1, 0), 64) : 0;
      float m = ninf;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float l = acc[mt][nt][2 * hh + e];
          if constexpr (COLS) l *= f[nt][e];
          if constexpr (!FULL) l = (8 * nt + 2 * tq + e < nv) ? l : ninf;
          acc[mt][nt][2 * hh + e] = l;
          m = max_nan(m, l);
        }
      m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = max_nan(m, __shfl_xor_sync(0xffffffffu, m, 2));
      float s = 0.0f;
      if (p.lse) {
        // Without COLS the logits are acc * base (base > 0): exp2(acc * base - m).
        const float ms = m == ninf ? 0.0f : (COLS ? m : m * p.base);
        const float b = COLS ? 1.0f : p.base;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) s += exp2f(fmaf(acc[mt][nt][2 * hh + e], b, -ms));
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
      }
      if (!COLS) m *= p.base;  // -inf stays -inf (base > 0)
      if (tq == 0) {
        pm[row] = m;
        pe[row] = s;
      }
    }
}

// One CTA per SM (160 KiB of shared memory at DP = 128), so registers are plentiful: 128
// accumulators + 32 fragment registers per thread. ptxas given the 255 of
// __launch_bounds__(256, 1) spills a few bytes; a cap of 232 compiles without spills.
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define MSA_TC_INDEXER_BOUNDS __maxnreg__(232)
#else
#define MSA_TC_INDEXER_BOUNDS __launch_bounds__(kThreads, 1)
#endif

template <int MT, int DP>
__global__ void MSA_TC_INDEXER_BOUNDS indexer_tc_kernel(const TcIndexerParams p) {
  using L = TcIndexerLayout<DP>;
  extern __shared__ __align__(128) char smem[];
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const float ninf = -FLT_MAX * 2.0f;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const TileLoc tl = locate_tile(cbt, p.W, p.Qb, blockIdx.x, p.NQ, blockIdx.x == 0 && blockIdx.y == 0);
  if (tl.b < 0) return;  // past the last tile (the grid is an upper bound)

  const int Bs = p.bt.Bs, MB = p.bt.max_blocks, Hi = p.Hi, TM = p.TM, Di = p.Di, Qb = p.Qb;
  const int nvis = min((tl.kv + Bs - 1) / Bs, tl.p1 / Bs + 1);  // blocks 0 .. nvis-1 are visible
  // This CTA computes visible blocks [cb, ce) and writes -inf into its share [tb, te) of the rest.
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
  const int sb0 = tl.p0 / TM * TM;                   // first TM-aligned sub-tile
  const int clast0 = min(tl.p1, sb0 + TM - 1) / Bs;  // last block the first sub-tile sees

  // -inf for every (query block, head) of the tile at blocks [c0, c1), coalesced along c.
  auto fill = [&](int c0, int c1) {
    const int n = c1 - c0;
    if (n <= 0) return;
    const int64_t total = int64_t{nqb} * Hi * n;
    for (int64_t i = tid; i < total; i += kThreads) {
      const int64_t rh = i / n;
      const int64_t qb = tl.qb0 + rh / Hi;
      if (qb < p.NQ) p.out[(qb * Hi + rh % Hi) * MB + c0 + (i - rh * n)] = ninf;
    }
  };
  fill(max(cb, clast0 + 1), ce);  // blocks only later sub-tiles (Qb > TM) see: they max into these
  fill(tb, te);
  if (cb >= ce) return;

  int32_t* s_page = reinterpret_cast<int32_t*>(smem + L::PAGE_OFF);
  for (int i = tid; i < ce - cb; i += kThreads) s_page[i] = static_cast<int32_t>(page_of(p.bt, tl.b, cb + i));

  char* const q_s = smem + L::Q_OFF;
  char* const k_s = smem + L::K_OFF;
  char* const stg = smem + L::STG_OFF;
  float* const s_ks = reinterpret_cast<float*>(smem + L::KS_OFF);
  float* const s_pm = reinterpret_cast<float*>(smem + L::PM_OFF);
  float* const s_pe = reinterpret_cast<float*>(smem + L::PE_OFF);
  int* const s_lim = reinterpret_cast<int*>(smem + L::LIM_OFF);
  float* const s_wmax = reinterpret_cast<float*>(smem + L::WMAX_OFF);
  const char* const qib = static_cast<const char*>(p.qi);
  const char* const kib = static_cast<const char*>(p.ki);

  // MMA roles: warp (wm, wn) owns rows [64 wm, +64) and keys [64 wn, +64) of each step.
  const int wm = warp & 3, wn = warp >> 2, g = lane >> 2, tq = lane & 3;
  const uint32_t a_addr = smem_addr(q_s) + ((wm * 64 + (lane & 15)) * L::ROW + (lane >> 4) * 8) * 2;
  const uint32_t b_addr =
      smem_addr(k_s) + ((wn * 64 + (lane & 7) + ((lane >> 4) << 3)) * L::ROW + ((lane >> 3) & 1) * 8) * 2;
  // Pooling roles: thread = (head ph, token slot ptt); its row in the tile is ptt * Hi + ph.
  const int logTM = __ffs(TM) - 1;
  const int ph = tid >> logTM, ptt = tid & (TM - 1);
  const bool pactive = ph < Hi;
  const int prow = pactive ? ptt * Hi + ph : 0;
  const int Qp = min(Qb, TM);  // tokens of one query block inside a sub-tile (aligned)
  const bool bs64 = Bs == 64;

  // This thread's share of a step's key loads: items n = 0, 1, ... are keys j0 + n * JS at
  // 16-byte column ch (bf16: 8 keys' worth of dims per chunk; fp8: 16).
  const int krow = p.fp8 ? Di : 2 * Di;  // bytes per key row
  const int lch = p.fp8 ? DP / 16 : DP / 8, lj0 = tid / lch, lc = tid % lch, ljs = kThreads / lch;
  const int ld_src = lj0 * krow + lc * 16, ld_step = ljs * krow;
  const int ld_dst = p.fp8 ? lj0 * DP + lc * 16 : (lj0 * L::ROW + lc * 8) * 2;
  const bool ld_ok = lc * 16 < krow;

  int sidx = 0;
  for (int sb = sb0; sb <= tl.p1; sb += TM, ++sidx) {
    const int plo = max(tl.p0, sb), phi = min(tl.p1, sb + TM - 1);
    const int tt0 = plo - sb, ntok = phi - plo + 1;
    const int c_end = min(ce, phi / Bs + 1);
    if (cb >= c_end) continue;
    const int t_first = tl.t0 + (plo - tl.p0);
    const int r_lo = tt0 * Hi, r_hi = (tt0 + ntok) * Hi;
    const int k_begin = cb * Bs;
    const int k_stop = min(c_end * Bs, phi + 1);  // keys past phi are masked for every row
    const int nch = (k_stop - k_begin + kChunk - 1) / kChunk;

    __syncthreads();  // page ids written; the previous sub-tile is done with Q and s_lim
    {
      constexpr int QCH = DP / 8;  // 16-byte chunks per row
#pragma unroll 4
      for (int n = 0; n < kRows * QCH / kThreads; ++n) {
        const int i = tid + n * kThreads, r = i / QCH, ch = i % QCH;
        char* dst = q_s + (r * L::ROW + ch * 8) * 2;
        if (r >= r_lo && r < r_hi && ch * 8 < Di)
          cp_async16(dst, qib + ((int64_t{t_first} * Hi + (r - r_lo)) * Di + ch * 8) * 2);
        else
          zero16(dst);
      }
      for (int r = tid; r < kRows; r += kThreads) s_lim[r] = (r >= r_lo && r < r_hi) ? sb + r / Hi : -1;
    }

    // Issues the loads of step i (keys [k0, k0 + 128) starting at block position `at`) as
    // two halves of 64 keys, one page each.
    auto issue = [&](int i, KPos at) {
      const int k0 = k_begin + i * kChunk, buf = i & 1;
      const KPos h1 = kpos_add(at, 64, Bs);
      const int pg0 = s_page[at.c - cb];  // k0 < k_stop always
      const int pg1 = k0 + 64 < k_stop ? s_page[h1.c - cb] : -1;
      const int64_t key0 = pg0 >= 0 ? int64_t{pg0} * Bs + at.off : -1;  // first key row of each half
      const int64_t key1 = pg1 >= 0 ? int64_t{pg1} * Bs + h1.off : -1;
      const char* const src0 = kib + max(key0, int64_t{0}) * krow;
      const char* const src1 = kib + max(key1, int64_t{0}) * krow;
      if (!p.fp8) {
        constexpr int CH = DP / 8, JS = kThreads / CH, NH = 64 / JS;  // items n < NH are in half 0
        char* const dst = k_s + buf * (kChunk * L::ROW * 2) + ld_dst;
#pragma unroll
        for (int n = 0; n < kChunk / JS; ++n) {
          const bool ok = (n < NH ? key0 : key1) >= 0 && ld_ok;
          char* d = dst + n * (JS * L::ROW * 2);
          if (ok)
            cp_async16(d, (n < NH ? src0 : src1) + ld_src + (n % NH) * ld_step);
          else
            zero16(d);
        }
      } else {
        constexpr int CH = DP / 16, JS = kThreads / CH, NH = 64 / JS;
        char* const dst = stg + ld_dst;
#pragma unroll
        for (int n = 0; n < kChunk / JS; ++n) {
          const bool ok = (n < NH ? key0 : key1) >= 0 && ld_ok;
          char* d = dst + n * (JS * DP);
          if (ok)
            cp_async16(d, (n < NH ? src0 : src1) + ld_src + (n % NH) * ld_step);
          else
            zero16(d);
        }
      }
      if (p.ki_scale != nullptr && tid < kChunk) {
        const int64_t kr = tid < 64 ? key0 : key1;
        float* dst = s_ks + buf * kChunk + tid;
        if (kr >= 0)
          cp_async4(dst, p.ki_scale + kr + (tid & 63));
        else
          *dst = 0.0f;
      }
      cp_async_commit();
    };

    KPos cur{cb, 0};  // block and offset of the current step's first key
    issue(0, cur);
    float run_m = ninf, run_e = 0.0f;  // pooled state of row prow over the current block
    for (int i = 0; i < nch; ++i) {
      const int k0 = k_begin + i * kChunk, buf = i & 1;
      const KPos half1 = kpos_add(cur, 64, Bs);
      cp_async_wait_all();
      if (p.fp8) {  // each thread converts the raw chunks it loaded itself
        constexpr int CH = DP / 16, JS = kThreads / CH;
        const int j0 = tid / CH, ch = tid % CH;
#pragma unroll
        for (int n = 0; n < kChunk / JS; ++n) {
          const int j = j0 + n * JS;
          const uint4 raw = *reinterpret_cast<const uint4*>(stg + j * DP + ch * 16);
          const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
          uint32_t o[8];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            o[2 * q] = e4m3x2_to_mma<MT>(w[q]);
            o[2 * q + 1] = e4m3x2_to_mma<MT>(w[q] >> 16);
          }
          uint4* dst = reinterpret_cast<uint4*>(k_s + ((buf * kChunk + j) * L::ROW + ch * 16) * 2);
          dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
          dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
        }
      }
      __syncthreads();  // step i in shared memory; everyone is done with step i - 1
      if (i + 1 < nch) issue(i + 1, kpos_add(cur, kChunk, Bs));

      const int kw0 = k0 + 64 * wn;  // this warp's first key
      const bool wok = kw0 < k_stop && s_page[(wn ? half1.c : cur.c) - cb] >= 0;
      const bool wrows = wm * 64 < r_hi && wm * 64 + 64 > r_lo;
      if (wrows) {
        float acc[4][8][4];
        if (wok) {
          const uint32_t kb = b_addr + buf * (kChunk * L::ROW * 2);
#pragma unroll
          for (int ks = 0; ks < DP / 16; ++ks) {
            uint32_t a[4][4], b[4][4];
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) ldsm_x4(a[mt], a_addr + (mt * 16 * L::ROW + ks * 16) * 2);
#pragma unroll
            for (int np = 0; np < 4; ++np) ldsm_x4(b[np], kb + (np * 16 * L::ROW + ks * 16) * 2);
#pragma unroll
            for (int mt = 0; mt < 4; ++mt)
#pragma unroll
              for (int nt = 0; nt < 8; ++nt) {
                const uint32_t b0 = b[nt >> 1][(nt & 1) * 2], b1 = b[nt >> 1][(nt & 1) * 2 + 1];
                if (ks == 0)
                  mma16816<MT, true>(acc[mt][nt], a[mt], b0, b1);  // C = 0: no zeroing of acc
                else
                  mma16816<MT, false>(acc[mt][nt], a[mt], b0, b1);
              }
          }
        } else {
#pragma unroll
          for (int mt = 0; mt < 4; ++mt)
#pragma unroll
            for (int nt = 0; nt < 8; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
        }
        float f[8][2];
        if (p.cols) {
#pragma unroll
          for (int nt = 0; nt < 8; ++nt)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float ks = p.ki_scale != nullptr ? s_ks[buf * kChunk + 64 * wn + 8 * nt + 2 * tq + e] : 1.0f;
              f[nt][e] = p.base * ks;
            }
        }
        const bool full = wok && kw0 + 63 <= plo;
        float* pm = s_pm + wn * kRows;
        float* pe = s_pe + wn * kRows;
        if (full) {
          if (p.cols)
            warp_partials<true, true>(acc, f, p, s_lim, pm, pe, wm * 64, kw0, wok, g, tq);
          else
            warp_partials<true, false>(acc, f, p, s_lim, pm, pe, wm * 64, kw0, wok, g, tq);
        } else {
          if (p.cols)
            warp_partials<false, true>(acc, f, p, s_lim, pm, pe, wm * 64, kw0, wok, g, tq);
          else
            warp_partials<false, false>(acc, f, p, s_lim, pm, pe, wm * 64, kw0, wok, g, tq);
        }
      }
      __syncthreads();  // partials of step i complete

      // Pool the partials per row and KV block, then over the tokens of each query block.
      for (int hf = 0; hf < (bs64 ? 2 : 1); ++hf) {
        const int kh = k0 + 64 * hf;
        if (kh >= k_stop) break;
        const int c = hf ? half1.c : cur.c;
        float m2 = s_pm[hf * kRows + prow], e2 = s_pe[hf * kRows + prow];
        if (!bs64) pool_merge(m2, e2, s_pm[kRows + prow], s_pe[kRows + prow], p.lse);
        if (bs64 || cur.off == 0) {  // the CTA's first step of block c
          run_m = m2;
          run_e = e2;
        } else {
          pool_merge(run_m, run_e, m2, e2, p.lse);
        }
        const int knext = bs64 ? kh + 64 : k0 + kChunk;
        if (!(bs64 || cur.off + kChunk >= Bs || knext >= k_stop)) continue;  // block c goes on
        const bool tvalid = pactive && ptt >= tt0 && ptt < tt0 + ntok;
        float v = ninf;
        if (tvalid) v = p.lse ? (run_m == ninf ? ninf : (run_m + log2f(run_e)) * kLn2) : run_m;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1)
          if (d < Qp) v = max_nan(v, __shfl_xor_sync(0xffffffffu, v, d));
        if (Qp > 32) {  // a query block spans Qp / 32 warps (TM >= 64: one head per warp)
          if (lane == 0) s_wmax[hf * (kThreads / 32) + warp] = v;
          __syncthreads();
          if ((ptt & (Qp - 1)) == 0)
            for (int w = 1; w < Qp / 32; ++w) v = max_nan(v, s_wmax[hf * (kThreads / 32) + warp + w]);
        }
        if (pactive && (ptt & (Qp - 1)) == 0 && ptt < tt0 + ntok && ptt + Qp > tt0) {
          const int64_t qb = tl.qb0 + (sb + ptt) / Qb - tl.p0 / Qb;
          if (qb < p.NQ) {
            float* o = p.out + (qb * Hi + ph) * int64_t{MB} + c;
            if (sidx > 0) v = max_nan(*o, v);  // Qb > TM: an earlier sub-tile of this query block
            *o = v;
          }
        }
      }
      cur = kpos_add(cur, kChunk, Bs);
    }
  }
}

template <int MT, int DP>
void launch(const TcIndexerParams& p, dim3 grid, Stream& st) {
  constexpr int smem = TcIndexerLayout<DP>::BYTES;
  allow_smem<indexer_tc_kernel<MT, DP>>(smem, st.props().index);
  indexer_tc_kernel<MT, DP><<<grid, kThreads, smem, st.native()>>>(p);
}

}  // namespace

void indexer_prefill_tc(Stream& st, const ops::IndexerScoreArgs& a, const IndexerShape& sh) {
  TcIndexerParams p;
  p.bt = indexer_batch(st, a);
  p.qi = a.qi.data<void>();
  p.ki = a.ki_cache.data<void>();
  p.ki_scale = a.ki_scale.present() ? a.ki_scale.data<float>() : nullptr;
  p.out = a.block_score.data<float>();
  p.Qb = a.Qb;
  p.NQ = a.NQ;
  p.Hi = static_cast<int>(sh.Hi);
  p.Di = static_cast<int>(sh.Di);
  p.TM = tile_tokens(p.Hi);
  p.W = std::max(a.Qb, p.TM);
  p.lse = sh.lse;
  p.fp8 = sh.keys == hal::DType::fp8_e4m3;
  p.base = a.scale * (p.lse ? kLog2e : 1.0f);
  p.cols = p.ki_scale != nullptr || !(p.base > 0.0f);
  const PrefillGrid g = prefill_grid(sh.T, sh.B, sh.NQ, sh.MB, a.Qb, p.TM, st.props().sm_count, kMaxSpan);
  p.nsplit = static_cast<int>(g.nsplit);
  const dim3 grid(static_cast<unsigned>(g.tiles), static_cast<unsigned>(g.nsplit));
  if (sh.qi == hal::DType::bf16) {
    p.Di <= 64 ? launch<kBF16, 64>(p, grid, st) : launch<kBF16, 128>(p, grid, st);
  } else {
    p.Di <= 64 ? launch<kF16, 64>(p, grid, st) : launch<kF16, 128>(p, grid, st);
  }
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::cuda
