// Split-KV decode attention (sparse_block_attention and dense_attention with few query
// tokens, bf16/f16, head dim a multiple of 16 up to 128) on the native tier (sm_80+).
//
// One thread block (4 warps) serves one (query block or token chunk, KV head, split): its
// up to 16 query rows (the GQA group of one token, or a few tokens x a small group) are the
// M = 16 rows of mma.sync m16n8k16 tiles, so every K/V byte read serves the whole group.
// Tiles of 64 keys (K and V, 16 KiB each at D = 128) stream through a 3-stage cp.async
// pipeline into XOR-swizzled shared rows (ldmatrix without bank conflicts); rows past the
// valid keys are zero-filled by the copy itself (src-size 0), so NaN in cache slack never
// reaches the MMAs. Warp w takes keys 16w..16w+15 of every tile and keeps its own online
// softmax (base 2) and O in registers; the 4 warps are combined once at the end.
//
// Split-KV without a second launch: with S > 1 splits each block writes its f32 partial
// (O / l and lse) to the stream's workspace, bumps a per-group counter, and the block that
// arrives last merges the S partials in fixed split order (bitwise deterministic whatever
// the arrival order) and resets the counter to zero. The counters are a static __device__
// array (zero at module load, left zero by every launch), one slot per stream, so there is
// no memset and no allocation per call and the launch is graph-capturable.
// The chooser (choose.h) takes these kernels for what they cover and a stream with a
// counter slot when the call splits; the split count is attn_geom::decode_splits.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/attention/mma_sync.cuh"

namespace msa::cuda {
namespace {
using namespace dec;

using attn_geom::kDecBK;
using attn_geom::kDecMaxSplits;
constexpr int kDecThreads = 128;  // 4 warps
constexpr int kDecWarps = kDecThreads / 32;
static_assert(kDecBK == 16 * kDecWarps, "keys per tile: 16 per warp");
static_assert(attn_geom::kDecMaxK <= kDecThreads, "one thread per selected block");
constexpr int kDecStages = 3;
constexpr int kCtrSlots = attn_geom::kDecCtrSlots;
constexpr int kCtrPerSlot = attn_geom::kDecCtrPerSlot;

// Split-KV arrival counters: [slot][group]; zero at load, reset to zero by the merging block.
__device__ unsigned int g_dec_ctr[kCtrSlots * kCtrPerSlot];

struct DecParams {
  Batch bt;
  const void* q = nullptr;
  const char* kc = nullptr;
  const char* vc = nullptr;
  const int32_t* bidx = nullptr;  // sparse: [NQ][Hs][k]
  int64_t NQ = 0;
  int Qb = 1, Hq = 1, Hkv = 1, G = 1, D = 0, k = 0, Hs = 1;
  int tpc = 1, nrc = 1, S = 1, tpb = 1;
  int guess_b = 0;  // sparse: NQ == B, so query block qb is probably sequence qb
  int slot = 0;     // counter slot (S > 1)
  float scale_log2 = 1.0f;
  AttnOut o;
};

template <int DP>
struct DecLayout {
  static constexpr int ROWB = DP * 2;         // bytes per K/V/Q row (16-bit types)
  static constexpr int TILE = kDecBK * ROWB;  // one K or V tile
  static constexpr int STAGE = 2 * TILE;
  static constexpr int Q_OFF = kDecStages * STAGE;
  static constexpr int BYTES = Q_OFF + 16 * ROWB;
  // After the main loop the stage area holds the warps' O and the merge weights.
  static constexpr int CROW = DP + 4;  // floats per combine row
  static constexpr int W_OFF = kDecWarps * 16 * CROW * 4;
  static_assert(W_OFF + 2 * kDecMaxSplits * 16 * 4 <= kDecStages * STAGE, "combine area");
};

// grid: groups x S (split fastest). Sparse groups: NQ x Hkv x row chunks; dense groups:
// token-chunk slots ((T + B (tpc - 1)) / tpc) x Hkv.
template <bool kDense, int DT, int DP>
__global__ void __launch_bounds__(kDecThreads, 2) decode_attn_kernel(const DecParams p) {
  using L = DecLayout<DP>;
  using T = typename Elem<DT>::T;
  extern __shared__ __align__(128) char smem[];
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  __shared__ int64_t s_row_id[16];
  __shared__ int s_row_lim[16];
  __shared__ int s_page[2][kDecThreads];  // sparse: page of entry j (row 0); dense: ring of 2 x 128 blocks
  __shared__ int s_blk[kDecThreads];      // sparse: logical block of entry j
  __shared__ int s_meta[kDecStages][2];   // per stage: first key position, keys to compute (0: none)
  __shared__ float s_m[kDecWarps][16], s_l[kDecWarps][16];
  __shared__ float s_rm[16], s_rl[16];
  __shared__ int s_last;

#if __CUDA_ARCH__ >= 900
  // Launched with programmatic stream serialization: wait for the previous work of the
  // stream (and its memory) before reading anything. A no-op in a plain launch.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const float ninf = __int_as_float(0xff800000u);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int Bs = p.bt.Bs;
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.S);
  x /= p.S;
  const int64_t group = x;

  // ---- locate the rows (all threads; contains barriers) ----
  int b = -1, g = 0, kv = 0, ntok = 0, t0 = 0, p0 = 0, rc = 0;
  int c_raw = -1, pg_raw = -1;
  bool have_pg = false;
  if constexpr (!kDense) {
    rc = static_cast<int>(x % p.nrc);
    x /= p.nrc;
    g = static_cast<int>(x % p.Hkv);
    const int64_t qb = x / p.Hkv;
    const int32_t* entries = p.bidx + (qb * p.Hs + (p.Hs == 1 ? 0 : g)) * int64_t{p.k};
    // Entries and (speculatively, query block qb = sequence qb) their pages are loaded
    // while the batch scan runs: one dependent global round trip before the K/V loads.
    if (tid < p.k) {
      c_raw = entries[tid];
      if (p.guess_b && c_raw >= 0 && c_raw < p.bt.max_blocks) pg_raw = p.bt.block_table[qb * p.bt.max_blocks + c_raw];
    }
    const Batch bt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
    const QBlock q = locate_qblock(bt, p.Qb, qb, p.NQ, blockIdx.x == 0);
    if (q.ntok <= rc * p.tpc) return;  // no rows here (uniform over the group)
    b = q.b;
    kv = q.kv;
    ntok = q.ntok;
    t0 = q.t0;
    p0 = q.p0;
    have_pg = p.guess_b && b == qb;
  } else {
    g = static_cast<int>(x % p.Hkv);
    const int64_t slot = x / p.Hkv;
    if (blockIdx.x == 0)
      for (int i = tid; i < p.bt.B; i += kDecThreads) load_seq(p.bt, i);
    const Batch bt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
    const ChunkLoc loc = locate_chunk(bt, slot, p.tpc);
    if (loc.b < 0) return;  // uniform over the group
    b = loc.b;
    rc = loc.chunk;
    kv = loc.s.kv;
    ntok = loc.s.qlen;
    t0 = loc.s.q0;
    p0 = loc.s.kv - loc.s.qlen;
  }
  if (tid < 16) {
    const int r = tid, ti = rc * p.tpc + r / p.G;
    const bool ok = r < p.tpc * p.G && ti < ntok;
    s_row_id[r] = ok ? int64_t{t0 + ti} * p.Hq + g * p.G + r % p.G : -1;
    s_row_lim[r] = ok ? min(kv - 1, p0 + ti) : -1;
  }
  __syncthreads();
  int max_lim = -1;
#pragma unroll
  for (int r = 0; r < 16; ++r) max_lim = max(max_lim, s_row_lim[r]);

  // ---- this split's tiles [u0, u1) (tile u: block entry u / tpb, part u % tpb) ----
  const int ntiles_all = kDense ? (max_lim / Bs + 1) * p.tpb : p.k * p.tpb;
  const int per = (ntiles_all + p.S - 1) / p.S;
  const int u0 = min(ntiles_all, split * per), u1 = min(ntiles_all, u0 + per);
  const int nt = u1 - u0;
  const int cb0 = u0 / p.tpb, cb1 = (u1 + p.tpb - 1) / p.tpb;  // entries / blocks touched
  int next_raw = -1;                                           // dense: page ids of the ring chunk after next
  if constexpr (!kDense) {
    if (tid < p.k) {
      int c = -1, pg = -1;
      if (tid >= cb0 && tid < cb1 && c_raw >= 0 && c_raw < (kv + Bs - 1) / Bs) {
        c = c_raw;
        pg = checked_page(p.bt, have_pg ? pg_raw : p.bt.block_table[int64_t{b} * p.bt.max_blocks + c]);
      }
      s_blk[tid] = c;
      s_page[0][tid] = pg;
    }
  } else {
    const int32_t* row = p.bt.block_table + int64_t{b} * p.bt.max_blocks;
    const int c0 = cb0 + tid, c1 = cb0 + kDecThreads + tid, c2 = cb0 + 2 * kDecThreads + tid;
    const int r0 = c0 < cb1 ? row[c0] : 0, r1 = c1 < cb1 ? row[c1] : 0;
    next_raw = c2 < cb1 ? row[c2] : 0;
    s_page[0][tid] = c0 < cb1 ? checked_page(p.bt, r0) : -1;
    s_page[1][tid] = c1 < cb1 ? checked_page(p.bt, r1) : -1;
  }
  __syncthreads();

  const uint32_t sbase = smem_u32(smem);
  constexpr int CPR = DP / 8;  // 16-byte chunks per row slot
  const int dch = p.D / 8, dsteps = p.D / 16;
  const int64_t rowbytes = int64_t{p.D} * 2;

  constexpr int KSTEP = kDecThreads / CPR, NCP = kDecBK / KSTEP;  // keys apart, chunks per thread
  static_assert(KSTEP % 8 == 0 && NCP * KSTEP == kDecBK, "copy mapping keeps the swizzle");
  const int key_t = tid / CPR, ch_t = tid % CPR;
  const bool ch_ok = ch_t < dch;
  const int64_t goff_t = key_t * rowbytes + ch_t * 16;
  const uint32_t soff_t = key_t * L::ROWB + ((ch_t ^ (key_t & 7)) << 4);
  auto issue = [&](int iu) {
    if (iu < nt) {
      const int u = u0 + iu, j = u / p.tpb, part = u % p.tpb;
      int c, pg;
      if constexpr (kDense) {
        const int lj = j - cb0;
        c = j;
        pg = s_page[(lj >> 7) & 1][lj & (kDecThreads - 1)];
      } else {
        c = s_blk[j];
        pg = s_page[0][j];
      }
      const int kpos0 = c * Bs + part * kDecBK;
      const int nk = min(kDecBK, min(Bs - part * kDecBK, kv - kpos0));
      const bool ok = c >= 0 && pg >= 0 && nk > 0 && kpos0 <= max_lim;
      const int st = iu % kDecStages;
      if (tid == 0) {
        s_meta[st][0] = kpos0;
        s_meta[st][1] = ok ? nk : 0;
      }
      if (ok) {
        // Thread tid copies chunk ch_t of keys key_t + i * KSTEP (i < NCP): the swizzle
        // (ch ^ key & 7) is the same for all its keys, so the offsets are affine in i.
        const char* kg = p.kc + ((int64_t{pg} * p.Hkv + g) * Bs + part * kDecBK) * rowbytes + goff_t;
        const char* vg = p.vc + (kg - p.kc);
        const uint32_t ks = sbase + st * L::STAGE + soff_t, vs = ks + L::TILE;
        if (ch_ok) {
#pragma unroll
          for (int i = 0; i < NCP; ++i) {
            const bool in = key_t + i * KSTEP < nk;  // else zero-fill, nothing read
            const int64_t go = in ? i * KSTEP * rowbytes : 0;
            cp_async16(ks + i * KSTEP * L::ROWB, kg + go, in ? 16 : 0);
            cp_async16(vs + i * KSTEP * L::ROWB, vg + go, in ? 16 : 0);
          }
        }
      }
    }
    cp_async_commit();
  };

#pragma unroll
  for (int s = 0; s < kDecStages - 1; ++s) issue(s);

  // ---- q rows -> shared (swizzled) -> A fragments ----
  {
    const char* qg = static_cast<const char*>(p.q);
    char* qs = smem + L::Q_OFF;
    for (int i = tid; i < 16 * CPR; i += kDecThreads) {
      const int r = i / CPR, ch = i % CPR;
      const int64_t id = s_row_id[r];
      uint4 v = make_uint4(0, 0, 0, 0);
      if (id >= 0 && ch < dch) v = ldg16(qg + id * rowbytes + ch * 16);
      *reinterpret_cast<uint4*>(qs + r * L::ROWB + ((ch ^ (r & 7)) << 4)) = v;
    }
  }
  __syncthreads();
  uint32_t qa[DP / 16][4];
  load_q_frags<DP>(sbase + L::Q_OFF, lane, dsteps, qa);

  // ---- main loop ----
  const int gq = lane >> 2, qd = lane & 3;  // mma group (row) and thread-in-group
  const int lim0 = s_row_lim[gq], lim1 = s_row_lim[gq + 8];
  float m_run[2] = {ninf, ninf}, l_run[2] = {0.0f, 0.0f};
  float o[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  for (int it = 0; it < nt; ++it) {
    cp_async_wait<kDecStages - 2>();
    __syncthreads();  // tile it has landed for every thread; stage (it - 1) % S is free
    if constexpr (kDense) {
      // The tile about to be issued starts ring chunk ch >= 2: chunk ch - 2's slot is free.
      const int iu = it + kDecStages - 1;
      if (iu < nt) {
        const int u = u0 + iu, lj = u / p.tpb - cb0;
        if (u % p.tpb == 0 && lj >= 2 * kDecThreads && lj % kDecThreads == 0) {
          const int chn = lj / kDecThreads;
          const int cn = cb0 + (chn + 1) * kDecThreads + tid;
          s_page[chn & 1][tid] = (cb0 + lj + tid < cb1) ? checked_page(p.bt, next_raw) : -1;
          next_raw = cn < cb1 ? p.bt.block_table[int64_t{b} * p.bt.max_blocks + cn] : 0;
          __syncthreads();
        }
      }
    }
    issue(it + kDecStages - 1);

    const int st = it % kDecStages;
    const int kpos0 = s_meta[st][0], nk = s_meta[st][1];
    const int kb = warp * 16;
    if (kb < nk) {  // warp-uniform
      const uint32_t ks = sbase + st * L::STAGE, vs = ks + L::TILE;
      float sacc[2][4];
      warp_qk<DT, DP>(qa, ks, kb, lane, dsteps, sacc);
      uint32_t pa[4];
      online_softmax<DT, DP>(
          sacc, [&](int kw, int h) { return kb + kw < nk && kpos0 + kb + kw <= (h ? lim1 : lim0); }, p.scale_log2,
          m_run, l_run, o, pa, lane);
      warp_pv<DT, DP>(pa, vs, kb, lane, dsteps, o);
    }
  }
  cp_async_wait<0>();
#if __CUDA_ARCH__ >= 900
  // The next kernel of the stream may start launching its blocks (they wait for this
  // grid's completion in their griddepcontrol.wait): hides the launch gap.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  __syncthreads();  // the stage area is free for the combine

  // ---- combine the 4 warps (fixed order) ----
  ptx::mark_nonfinite_rows(o, l_run);  // a non-finite attended value: a NaN row
  publish_stats(m_run, l_run, s_m[warp], s_l[warp], lane);
  __syncthreads();
  float* cb = reinterpret_cast<float*>(smem);  // [warp][16][CROW]
  {
    float f[2];
    warp_factors<kDecWarps>(s_m, m_run, lane, f);
    float* mine = cb + warp * 16 * L::CROW;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      const int d = 8 * n + 2 * qd;
      *reinterpret_cast<float2*>(mine + gq * L::CROW + d) = make_float2(o[n][0] * f[0], o[n][1] * f[0]);
      *reinterpret_cast<float2*>(mine + (gq + 8) * L::CROW + d) = make_float2(o[n][2] * f[1], o[n][3] * f[1]);
    }
  }
  if (tid < 16) {
    float M, l;
    merged_stats<kDecWarps>(s_m, s_l, tid, M, l);
    const bool nan_row = l != l, empty = !(l > 0.0f);             // NaN: a non-finite logit (docs/spec.md)
    s_rl[tid] = nan_row ? quiet_nan() : empty ? 0.0f : 1.0f / l;  // 1 / l (0: empty row, output 0)
    s_rm[tid] = nan_row ? quiet_nan() : empty ? ninf : (M + log2f(l)) * 0.69314718055994531f;  // lse
  }
  __syncthreads();

  // Thread tid writes row tid / 8, dims [SEG * (tid % 8), + SEG) in float4 steps.
  constexpr int SEG = DP / 8;
  static_assert(kDecThreads == 16 * 8 && SEG % 4 == 0, "output mapping");
  const int D = p.D;
  const bool split_mode = p.S > 1;
  const int orow = tid >> 3, d0 = (tid & 7) * SEG;
  const int64_t oid = s_row_id[orow];
  if (oid >= 0) {
    const float inv = s_rl[orow];
#pragma unroll
    for (int v = 0; v < SEG / 4; ++v) {
      const int d = d0 + 4 * v;
      if (d < D) {
        float4 a = *reinterpret_cast<const float4*>(cb + orow * L::CROW + d);
#pragma unroll
        for (int w = 1; w < kDecWarps; ++w) {
          const float4 b4 = *reinterpret_cast<const float4*>(cb + (w * 16 + orow) * L::CROW + d);
          a.x += b4.x;
          a.y += b4.y;
          a.z += b4.z;
          a.w += b4.w;
        }
        a = make_float4(a.x * inv, a.y * inv, a.z * inv, a.w * inv);
        if (split_mode) {
          *reinterpret_cast<float4*>(p.o.part_o + (int64_t{split} * p.o.rows_total + oid) * D + d) = a;
        } else {
          store4<DT>(static_cast<T*>(p.o.out) + oid * D + d, a);
        }
      }
    }
    if (d0 == 0) {
      if (split_mode)
        p.o.part_lse[int64_t{split} * p.o.rows_total + oid] = s_rm[orow];
      else
        p.o.lse[oid] = s_rm[orow];
    }
  }
  if (!split_mode) return;

  // ---- split-KV: the last block of the group merges the partials in split order ----
  __threadfence();
  __syncthreads();
  unsigned int* ctr = g_dec_ctr + int64_t{p.slot} * kCtrPerSlot + group;
  if (tid == 0) s_last = atomicAdd(ctr, 1u) == static_cast<unsigned>(p.S - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // The merge is latency-bound (L2 round trips, one block): loads are issued many at a
  // time and the per-row work is spread over the threads.
  float* lses = reinterpret_cast<float*>(smem + L::W_OFF);  // [S][16] partial lse
  float* wts = lses + kDecMaxSplits * 16;                   // [S][16] merge weights
  const int64_t rows = p.o.rows_total;
  constexpr int kPairs = kDecMaxSplits * 16 / kDecThreads;  // (split, row) pairs per thread
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int e = tid + i * kDecThreads, sp = e >> 4, r = e & 15;
    if (sp < p.S) {
      const int64_t id = s_row_id[r];
      lses[e] = id >= 0 ? __ldcg(p.o.part_lse + sp * rows + id) : ninf;
    }
  }
  __syncthreads();
  if (tid < 16) {
    float m = ninf;
    bool nan_row = false;  // a split with a non-finite row wrote NaN (docs/spec.md)
    for (int sp = 0; sp < p.S; ++sp) {
      const float ls = lses[sp * 16 + tid];
      nan_row = nan_row || ls != ls;
      m = fmaxf(m, ls);
    }
    s_rm[tid] = nan_row ? quiet_nan() : m;
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kPairs; ++i) {
    const int e = tid + i * kDecThreads, sp = e >> 4, r = e & 15;
    if (sp < p.S) wts[e] = s_rm[r] == ninf ? 0.0f : expf(lses[e] - s_rm[r]);
  }
  __syncthreads();
  if (tid < 16) {
    float ws = 0.0f;
    for (int sp = 0; sp < p.S; ++sp) ws += wts[sp * 16 + tid];
    s_rl[tid] = ws;
  }
  __syncthreads();
  if (oid >= 0) {
    const float m = s_rm[orow];
    T* out = static_cast<T*>(p.o.out) + oid * D;
    if (m == ninf || m != m) {  // nothing attended / a non-finite row
      const float z = m == ninf ? 0.0f : quiet_nan();
#pragma unroll
      for (int v = 0; v < SEG / 4; ++v)
        if (d0 + 4 * v < D) store4<DT>(out + d0 + 4 * v, make_float4(z, z, z, z));
      if (d0 == 0) p.o.lse[oid] = m == ninf ? ninf : quiet_nan();
    } else {
      float4 acc[SEG / 4];
#pragma unroll
      for (int v = 0; v < SEG / 4; ++v) acc[v] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      const float* src = p.o.part_o + oid * D + d0;
      for (int s0 = 0; s0 < p.S; s0 += 4) {
        float4 x[4][SEG / 4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int v = 0; v < SEG / 4; ++v)
            if (s0 + j < p.S && d0 + 4 * v < D)
              x[j][v] = __ldcg(reinterpret_cast<const float4*>(src + (s0 + j) * rows * D + 4 * v));
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (s0 + j < p.S) {
            const float w = wts[(s0 + j) * 16 + orow];
#pragma unroll
            for (int v = 0; v < SEG / 4; ++v)
              if (d0 + 4 * v < D) {
                acc[v].x = fmaf(w, x[j][v].x, acc[v].x);
                acc[v].y = fmaf(w, x[j][v].y, acc[v].y);
                acc[v].z = fmaf(w, x[j][v].z, acc[v].z);
                acc[v].w = fmaf(w, x[j][v].w, acc[v].w);
              }
          }
      }
      const float ws = s_rl[orow], inv = 1.0f / ws;
#pragma unroll
      for (int v = 0; v < SEG / 4; ++v)
        if (d0 + 4 * v < D)
          store4<DT>(out + d0 + 4 * v, make_float4(acc[v].x * inv, acc[v].y * inv, acc[v].z * inv, acc[v].w * inv));
      if (d0 == 0) p.o.lse[oid] = m + logf(ws);
    }
  }
  if (tid == 0) *ctr = 0u;  // every block of the group has counted: ready for the next launch
}

template <bool kDense>
void launch_decode(Stream& st, DecParams& p, hal::DType dt, int64_t groups) {
  if (groups <= 0) return;
  if (p.S > 1) {
    p.slot = stream_slot(st, kCtrSlots);
    if (p.slot < 0) throw Error("decode_split: internal error: a split launch on a stream without a counter slot");
    split_buffers(st, p.S, int64_t{p.bt.T} * p.Hq, p.D, p.o);
  }
  const unsigned grid = static_cast<unsigned>(groups * p.S);
  const auto go = [&](auto dt_tag, auto dp_tag) {
    constexpr int DT = decltype(dt_tag)::value, DP = decltype(dp_tag)::value;
    constexpr int smem = DecLayout<DP>::BYTES;
    allow_smem<decode_attn_kernel<kDense, DT, DP>>(smem, st.props().index);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(kDecThreads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st.native();
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = (st.tuning().pdl != 0 && st.props().cc_major >= 9) ? 1 : 0;
    MSA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, decode_attn_kernel<kDense, DT, DP>, p));
  };
  using BF = std::integral_constant<int, kBF16>;
  using HF = std::integral_constant<int, kF16>;
  using D64 = std::integral_constant<int, 64>;
  using D128 = std::integral_constant<int, 128>;
  if (dt == hal::DType::bf16) {
    if (p.D <= 64)
      go(BF{}, D64{});
    else
      go(BF{}, D128{});
  } else {
    if (p.D <= 64)
      go(HF{}, D64{});
    else
      go(HF{}, D128{});
  }
  MSA_CUDA_CHECK_LAUNCH();
}

// The fields both ops' parameter structs share (SparseParams / DenseParams).
template <class OpParams>
DecParams decode_params(const OpParams& a) {
  DecParams p;
  p.bt = a.bt;
  p.q = a.q;
  p.kc = a.kc;
  p.vc = a.vc;
  p.Hq = a.Hq;
  p.Hkv = a.Hkv;
  p.G = a.G;
  p.D = a.D;
  p.tpc = a.tpc;
  p.tpb = attn_geom::decode_tiles_per_block(a.bt.Bs);
  p.scale_log2 = a.scale * 1.4426950408889634f;
  p.o.out = a.o.out;
  p.o.lse = a.o.lse;
  return p;
}

}  // namespace

void launch_decode_split_sparse(Stream& st, const SparseParams& sp, hal::DType dt) {
  DecParams p = decode_params(sp);
  p.bidx = sp.bidx;
  p.NQ = sp.NQ;
  p.Qb = sp.Qb;
  p.k = sp.k;
  p.Hs = sp.Hs;
  p.nrc = sp.nrc;
  p.guess_b = sp.NQ == sp.bt.B ? 1 : 0;
  const int64_t groups = attn_geom::decode_sparse_groups(attn_call(st, sp, dt));
  p.S = attn_geom::decode_splits(groups, int64_t{sp.k} * p.tpb, st.props());
  launch_decode<false>(st, p, dt, groups);
}

void launch_decode_split_dense(Stream& st, const DenseParams& dp, hal::DType dt) {
  DecParams p = decode_params(dp);
  const int64_t groups = attn_geom::decode_dense_groups(attn_call(st, dp, dt));
  p.S = attn_geom::decode_splits(groups, int64_t{dp.bt.max_blocks} * p.tpb, st.props());
  launch_decode<true>(st, p, dt, groups);
}

}  // namespace msa::cuda
