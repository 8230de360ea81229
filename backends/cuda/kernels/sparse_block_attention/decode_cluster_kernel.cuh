// The device side of decode_cluster.cu, its only includer (the design is described there):
// the kernel's shapes, ClParams and the shared-memory layout, the warp-level search for a
// query block, the global merge of the ranks' partials and cluster_decode_kernel. Written
// into decode_cluster.cu's anonymous namespace, as if it stood there.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention/choose.h"
#include "backends/cuda/kernels/attention/mma_sync.cuh"
#include "backends/cuda/kernels/common/hopper_ptx.cuh"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"

namespace msa::cuda {
namespace {
using namespace dec;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kBs = attn_geom::kClBs;      // keys per KV block
constexpr int kD = attn_geom::kClD;        // head dim
constexpr int kGrp = attn_geom::kClGroup;  // query rows (heads of one GQA group)
constexpr int kRowB = kD * 2;              // bytes per K/V/Q row
constexpr int kHalf = kBs * kRowB;         // one K or V slab: 32 KiB
constexpr int kMaxE = attn_geom::kClMaxE;  // blocks per rank (k <= 128)
constexpr int kMaxC = attn_geom::kClMaxC;
static_assert(kWarps * 16 == kBs, "warp w owns keys 16w..16w+15 of a block");

// Global merge (C ranks that are not a hardware cluster): per-group arrival counters, one
// set per stream slot (concurrent launches on other streams must not share them).
constexpr int kGmSlots = 8;
constexpr int kGmPerSlot = 4096;                 // groups per launch in global-merge mode
constexpr int kGmStride = kGrp * kD + 2 * kGrp;  // floats per rank's partial: O, max, sum
__device__ unsigned int g_cl_ctr[kGmSlots * kGmPerSlot];

// The op's parameters (SparseParams: S and o.part_* unused) and the cluster geometry.
struct ClParams {
  SparseParams sp;
  int C = 1, E = 1;  // ranks per group (the cluster size unless gmerge), blocks per rank
  // gmerge: the C ranks of a group are plain CTAs (no cluster); each writes its partial to
  // ws[group][rank] and the last to arrive on ctr[group] merges them (see the kernel).
  int gmerge = 0;
  float* ws = nullptr;
  int slot = 0;     // this stream's counters: g_cl_ctr[slot][group] (indexed on the device)
  int guess_b = 0;  // NQ == B: query block qb is probably sequence qb
  float scale_log2 = 1.0f;
};

template <int NS>
struct ClLayout {
  static constexpr int Q_OFF = NS * kHalf;                // [16][256 B] q rows (swizzled)
  static constexpr int XROW = kD + 4;                     // floats per export row
  static constexpr int X_OFF = Q_OFF + kGrp * kRowB;      // [16][XROW] f32: this CTA's O
  static constexpr int ML_OFF = X_OFF + kGrp * XROW * 4;  // [2][16]: its max (base 2), sum
  static constexpr int BYTES = ML_OFF + 2 * kGrp * 4;
  // After the main loop the stage area holds the 8 warps' O in fragment order.
  static_assert(NS * kHalf >= kWarps * kGrp * kD * 4, "combine area");
};

// locate_qblock for batches of at most 32 sequences by one warp: lane b reads sequence b
// (with the same validation and flags), an inclusive scan of the query blocks per sequence
// finds the first sequence whose blocks reach past qb. Instead of every thread's serial
// walk over the sequences (a chain of loads and divisions per sequence). The answer
// {b, t0, ntok, p0, kv} (b = -1, ntok = 0 when not found) goes to `out` in shared memory.
__device__ __forceinline__ void locate_qblock_warp(const Batch& bt, int Qb, int64_t qb, int64_t NQ, bool check_nq,
                                                   int* out) {
  const int lane = threadIdx.x % 32;
  Seq s;
  int nb = 0;
  if (lane < bt.B) {
    s = load_seq(bt, lane, check_nq);
    nb = s.ok ? seq_qblocks(s, Qb) : 0;
  }
  int64_t incl = nb;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int64_t v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  // incl never decreases over the lanes: the first lane past qb holds it (and has nb > 0).
  const unsigned past = __ballot_sync(0xffffffffu, lane < bt.B && qb < incl);
  const int hit = past ? __ffs(static_cast<int>(past)) - 1 : -1;
  if (lane == hit) {
    const int first = s.kv - s.qlen;  // position of the sequence's first token
    const int blk = first / Qb + static_cast<int>(qb - (incl - nb));
    const int pstart = max(first, blk * Qb), pend = min(s.kv - 1, blk * Qb + Qb - 1);
    out[0] = lane;
    out[1] = s.q0 + (pstart - first);
    out[2] = pend - pstart + 1;
    out[3] = pstart;
    out[4] = s.kv;
  } else if (hit < 0 && lane == 0) {
    out[0] = -1;
    out[1] = out[2] = out[3] = out[4] = 0;
  }
  const int64_t total = __shfl_sync(0xffffffffu, incl, 31);  // lanes >= B add nothing
  if (check_nq && lane == 0 && total != NQ) raise_flag(bt.flag, kErrNQ, bt.op);
}

__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Global merge of a group's C partials (ClParams::gmerge): this CTA's partial (xo: [16]
// [XROW] O, xml: 16 max (base 2) then 16 sums, in shared memory) goes to ws[group][rank];
// after the block barrier, thread 0 counts the CTA in on ctr[group] with an acq_rel
// atomic (the release covers the whole block's stores, ordered before it by the barrier:
// one fence for the CTA instead of one per thread), and the last of the C to arrive
// combines them in rank order (deterministic whatever the arrival order), writes the
// group's 16 rows of out and lse, and resets the counter for the next launch. No CTA
// waits for another: no co-residency needed.
template <int DT>
__device__ void merge_global(const ClParams& cp, const float* xo, const float* xml, int64_t grp, int rank, int64_t tok,
                             int g, int& s_last) {
  using T = typename Elem<DT>::T;
  constexpr int XROW = kD + 4;
  const SparseParams& p = cp.sp;
  const int tid = threadIdx.x, C = cp.C;
  const float ninf = __int_as_float(0xff800000u);
  unsigned int* ctr = g_cl_ctr + int64_t{cp.slot} * kGmPerSlot + grp;
  float* mine = cp.ws + (grp * C + rank) * int64_t{kGmStride};
  __syncthreads();  // xo is complete (the cluster path's barrier does this there)
  for (int i = tid; i < kGrp * kD / 4; i += kThreads) {
    const int row = i / (kD / 4), c4 = i % (kD / 4);
    reinterpret_cast<float4*>(mine)[i] = *reinterpret_cast<const float4*>(xo + row * XROW + c4 * 4);
  }
  if (tid < 2 * kGrp) mine[kGrp * kD + tid] = xml[tid];
  __syncthreads();
  if (tid == 0) {
    unsigned int before;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;\n" : "=r"(before) : "l"(ctr) : "memory");
    s_last = before == static_cast<unsigned>(C - 1) ? 1 : 0;
  }
  __syncthreads();  // thread 0's acquire, then this barrier: the other partials are visible
  if (!s_last) return;
  const float* base = cp.ws + grp * C * int64_t{kGmStride};
  // Thread (row, 8-dim segment): 16 x 16 = 256 threads. One pass, ranks in order, four
  // ranks' loads in flight at once; the running max rescales what is summed so far.
  const int row = tid / 16, seg = tid % 16;
  float M = ninf, l = 0.0f;
  bool nan_row = false;  // a rank with a non-finite row (NaN sum; docs/spec.md)
  float4 a0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), a1 = a0;
  for (int s0 = 0; s0 < C; s0 += 4) {
    float ms[4], ls[4];
    float4 x0[4], x1[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      ms[u] = ninf;
      if (s0 + u < C) {
        const float* src = base + (s0 + u) * int64_t{kGmStride};
        ms[u] = __ldcg(src + kGrp * kD + row);
        ls[u] = __ldcg(src + kGrp * kD + kGrp + row);
        x0[u] = __ldcg(reinterpret_cast<const float4*>(src + row * kD + seg * 8));
        x1[u] = __ldcg(reinterpret_cast<const float4*>(src + row * kD + seg * 8 + 4));
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      if (s0 + u < C && ls[u] != ls[u]) nan_row = true;
      if (ms[u] == ninf) continue;  // no key of this rank (or past C): nothing to add
      const float Mn = fmaxf(M, ms[u]);
      const float r = exp2f(M - Mn), w = exp2f(ms[u] - Mn);  // r = 0 while M is -inf
      M = Mn;
      l = fmaf(l, r, w * ls[u]);
      a0 = make_float4(fmaf(w, x0[u].x, a0.x * r), fmaf(w, x0[u].y, a0.y * r), fmaf(w, x0[u].z, a0.z * r),
                       fmaf(w, x0[u].w, a0.w * r));
      a1 = make_float4(fmaf(w, x1[u].x, a1.x * r), fmaf(w, x1[u].y, a1.y * r), fmaf(w, x1[u].z, a1.z * r),
                       fmaf(w, x1[u].w, a1.w * r));
    }
  }
  const int64_t oid = tok * p.Hq + g * kGrp + row;
  T* out = static_cast<T*>(p.o.out) + oid * kD + seg * 8;
  if (nan_row) {
    const float n = quiet_nan();
    store4<DT>(out, make_float4(n, n, n, n));
    store4<DT>(out + 4, make_float4(n, n, n, n));
    if (seg == 0) p.o.lse[oid] = n;
  } else if (M == ninf || !(l > 0.0f)) {
    store4<DT>(out, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    store4<DT>(out + 4, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
    if (seg == 0) p.o.lse[oid] = ninf;
  } else {
    const float inv = 1.0f / l;
    store4<DT>(out, make_float4(a0.x * inv, a0.y * inv, a0.z * inv, a0.w * inv));
    store4<DT>(out + 4, make_float4(a1.x * inv, a1.y * inv, a1.z * inv, a1.w * inv));
    if (seg == 0) p.o.lse[oid] = (M + log2f(l)) * 0.69314718055994531f;
  }
  if (tid == 0) *ctr = 0u;  // every rank has counted: ready for the next launch
}

// grid: groups x C (rank fastest), clusters of C along x. Group = (query block, KV head,
// row chunk = token of the query block).
// One CTA per SM: q fragments in registers, NS stages of 32 KiB.
template <int DT, int NS>
__global__ void __launch_bounds__(kThreads, 1) cluster_decode_kernel(const ClParams cp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters: sm_90 only (the chooser asks DeviceProps::hopper_code)
#else
  using L = ClLayout<NS>;
  const SparseParams& p = cp.sp;
  using T = typename Elem<DT>::T;
  extern __shared__ __align__(128) char smem[];
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  __shared__ int s_qblock[5];                 // locate_qblock_warp's answer
  __shared__ int s_page[kMaxE], s_nk[kMaxE];  // this rank's blocks: page, keys to use (0: none)
  __shared__ float s_m[kWarps][kGrp], s_l[kWarps][kGrp];
  __shared__ float s_cm[kGrp], s_cl[kGrp], s_cw[kGrp];  // cluster merge: [rank][row] (C x 16/C)
  __shared__ float s_fm[kGrp], s_fl[kGrp];
  __shared__ int s_last;

  const float ninf = __int_as_float(0xff800000u);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int C = cp.C;
  const int rank = static_cast<int>(blockIdx.x % static_cast<unsigned>(C));
  int64_t x = blockIdx.x / static_cast<unsigned>(C);
  const int rc = static_cast<int>(x % p.nrc);
  x /= p.nrc;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t qb = x / p.Hkv;

  // This rank's entries and (speculatively: query block qb = sequence qb) their pages are
  // loaded by warps 1.. while warp 0 locates the query block (small batches): neither
  // waits for the other's loads. Entry j belongs to thread kEntry0 + j.
  constexpr int kEntry0 = 32;
  static_assert(kEntry0 + kMaxE <= kThreads, "one thread per entry");
  const int e0 = rank * cp.E;
  const int ne = max(0, min(p.k, e0 + cp.E) - e0);
  const int te = tid - kEntry0;  // this thread's entry, if 0 <= te < ne
  const int32_t* entries = p.bidx + (qb * p.Hs + (p.Hs == 1 ? 0 : g)) * int64_t{p.k};
  int c_raw = -1, pg_raw = -1;
  if (te >= 0 && te < ne) {
    c_raw = entries[e0 + te];
    if (cp.guess_b && c_raw >= 0 && c_raw < p.bt.max_blocks) pg_raw = p.bt.block_table[qb * p.bt.max_blocks + c_raw];
  }
  QBlock q;
  if (p.bt.B <= 32) {
    if (warp == 0) locate_qblock_warp(p.bt, p.Qb, qb, p.NQ, blockIdx.x == 0, s_qblock);
    __syncthreads();
    q.b = s_qblock[0];
    q.t0 = s_qblock[1];
    q.ntok = s_qblock[2];
    q.p0 = s_qblock[3];
    q.kv = s_qblock[4];
  } else {
    const Batch bt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
    q = locate_qblock(bt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  }
  if (q.ntok <= rc) return;  // no token here: uniform over the cluster (no cluster barrier yet)
  const int b = q.b, kv = q.kv;
  const int64_t tok = q.t0 + rc;
  const int lim = min(kv - 1, q.p0 + rc);  // last visible position
  // The q rows are requested before any slab: behind 160 KiB of copies they would arrive
  // last, and the first half could not be consumed before them (ncu profile).
  const int q_r = tid / 16, q_ch = tid % 16;
  const uint4 q_val = ldg16(static_cast<const char*>(p.q) + (tok * p.Hq + g * kGrp + q_r) * kRowB + q_ch * 16);
  if (te >= 0 && te < ne) {
    int nk = 0, pg = -1;
    if (c_raw >= 0 && c_raw < (kv + kBs - 1) / kBs) {  // else: contributes nothing
      const bool have_pg = cp.guess_b && b == qb;
      pg = checked_page(p.bt, have_pg ? pg_raw : p.bt.block_table[int64_t{b} * p.bt.max_blocks + c_raw]);
      if (pg >= 0) nk = max(0, min(kBs, lim - c_raw * kBs + 1));
    }
    s_page[te] = pg;
    s_nk[te] = nk;
  }
  __syncthreads();

  // ---- copies: half h = block h / 2, K (h even) or V (h odd), into stage h % NS ----
  const uint32_t sbase = smem_u32(smem);
  const int nh = 2 * ne;
  // Thread tid copies 16-byte chunk ch_t of rows key_t + 16 i (i < 8); the swizzle
  // (chunk ^ row & 7) is the same for all of them.
  const int ch_t = tid % 16, key_t = tid / 16;
  const int64_t goff_t = int64_t{key_t} * kRowB + ch_t * 16;
  const uint32_t soff_t = key_t * kRowB + ((ch_t ^ (key_t & 7)) << 4);
  auto issue = [&](int h) {
    if (h < nh) {
      const int j = h >> 1, nk = s_nk[j];
      if (nk > 0) {
        const char* src = ((h & 1) ? p.vc : p.kc) + (int64_t{s_page[j]} * p.Hkv + g) * kHalf + goff_t;
        const uint32_t dst = sbase + (h % NS) * kHalf + soff_t;
#pragma unroll
        for (int i = 0; i < kBs / 16; ++i) {
          const bool in = key_t + 16 * i < nk;  // else zero-fill, nothing read
          cp_async16(dst + i * 16 * kRowB, src + (in ? i * 16 * kRowB : 0), in ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < NS - 1; ++s) issue(s);

  // ---- q rows -> shared (swizzled) -> A fragments ----
  *reinterpret_cast<uint4*>(smem + L::Q_OFF + q_r * kRowB + ((q_ch ^ (q_r & 7)) << 4)) = q_val;
  __syncthreads();
  uint32_t qa[kD / 16][4];
  load_q_frags<kD>(sbase + L::Q_OFF, lane, kD / 16, qa);

  // ---- main loop over the halves ----
  const int gq = lane >> 2, qd = lane & 3;  // mma group (row) and thread in group
  const int kb = warp * 16;                 // this warp's keys in every block
  float m_run[2] = {ninf, ninf}, l_run[2] = {0.0f, 0.0f};
  float o[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  uint32_t pa[4] = {0u, 0u, 0u, 0u};
  bool act = false;  // this warp has keys in the current block (warp-uniform)

  for (int h = 0; h < nh; ++h) {
    const int st = h % NS;
    cp_async_wait<NS - 2>();
    __syncthreads();  // half h has landed for every thread; stage (h - 1) % NS is free
    issue(h + NS - 1);
    const int nk = s_nk[h >> 1];
    const uint32_t buf = sbase + st * kHalf;
    if ((h & 1) == 0) {
      act = kb < nk;
      if (act) {  // one token: rows gq and gq + 8 see the same keys
        float sacc[2][4];
        warp_qk<DT, kD>(qa, buf, kb, lane, kD / 16, sacc);
        online_softmax<DT, kD>(
            sacc, [&](int kw, int) { return kb + kw < nk; }, cp.scale_log2, m_run, l_run, o, pa, lane);
      }
    } else if (act) {
      warp_pv<DT, kD>(pa, buf, kb, lane, kD / 16, o);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the stages: they hold the combine now

  // ---- combine the 8 warps (fixed order) into this CTA's partial: X = O, M, sum ----
  ptx::mark_nonfinite_rows(o, l_run);  // a non-finite attended value: a NaN row
  publish_stats(m_run, l_run, s_m[warp], s_l[warp], lane);
  __syncthreads();
  float* xo = reinterpret_cast<float*>(smem + L::X_OFF);    // [16][XROW]
  float* xml = reinterpret_cast<float*>(smem + L::ML_OFF);  // [0..15] max, [16..31] sum
  {
    float f[2];
    warp_factors<kWarps>(s_m, m_run, lane, f);
    // Fragment order: element e of n-tile n of lane l at [warp][n * 4 + e][l] (the stores
    // and the column sums below are conflict-free).
    float* cw = reinterpret_cast<float*>(smem) + warp * (kD / 8) * 4 * 32;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) cw[(n * 4 + e) * 32 + lane] = o[n][e] * f[e >> 1];
  }
  if (tid < kGrp) merged_stats<kWarps>(s_m, s_l, tid, xml[tid], xml[kGrp + tid]);
  __syncthreads();
  {
    // Position f = tid + 256 i holds (n * 4 + e) = f / 32 = warp + 8 i and lane l = lane:
    // row l / 4 + 8 (e / 2), dim 8 n + 2 (l % 4) + e % 2.
    const float* cw = reinterpret_cast<const float*>(smem);
    constexpr int kPerWarp = (kD / 8) * 4 * 32;
#pragma unroll
    for (int i = 0; i < kPerWarp / kThreads; ++i) {
      const int fpos = tid + kThreads * i;
      float s = cw[fpos];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) s += cw[w * kPerWarp + fpos];
      const int ne4 = fpos / 32, n = ne4 >> 2, e = ne4 & 3;
      const int row = gq + 8 * (e >> 1), d = 8 * n + 2 * qd + (e & 1);
      xo[row * L::XROW + d] = s;
    }
  }

  if (cp.gmerge) {
    merge_global<DT>(cp, xo, xml, blockIdx.x / static_cast<unsigned>(C), rank, tok, g, s_last);
    return;
  }

  // ---- merge the C ranks' partials through distributed shared memory ----
  cluster_sync_all();  // every rank's X, max and sum are written and visible
  const int rows_per = kGrp / C;
  if (tid < kGrp) {  // (source rank s, row) pairs: C x rows_per = 16
    const int s = tid / rows_per, row = rank * rows_per + tid % rows_per;
    const float* rml = static_cast<const float*>(__cluster_map_shared_rank(xml, static_cast<unsigned>(s)));
    s_cm[tid] = rml[row];
    s_cl[tid] = rml[kGrp + row];
  }
  __syncthreads();
  if (tid < rows_per) {
    float M = ninf;
    for (int s = 0; s < C; ++s) M = fmaxf(M, s_cm[s * rows_per + tid]);
    float l = 0.0f;
    bool nan_row = false;  // a rank with a non-finite row (NaN sum; docs/spec.md)
    for (int s = 0; s < C; ++s) {
      const float ms = s_cm[s * rows_per + tid];
      const float w = ms == ninf ? 0.0f : exp2f(ms - M);
      s_cw[s * rows_per + tid] = w;
      l += w * s_cl[s * rows_per + tid];
      nan_row = nan_row || s_cl[s * rows_per + tid] != s_cl[s * rows_per + tid];
    }
    s_fm[tid] = M;
    s_fl[tid] = nan_row ? quiet_nan() : l;
  }
  __syncthreads();
  if (tid < rows_per * 16) {  // (row, 8-dim segment)
    const int rr = tid / 16, seg = tid % 16, row = rank * rows_per + rr;
    const int64_t oid = tok * p.Hq + g * kGrp + row;
    T* out = static_cast<T*>(p.o.out) + oid * kD + seg * 8;
    const float M = s_fm[rr], l = s_fl[rr];
    if (l != l) {  // a non-finite row
      const float n = quiet_nan();
      store4<DT>(out, make_float4(n, n, n, n));
      store4<DT>(out + 4, make_float4(n, n, n, n));
      if (seg == 0) p.o.lse[oid] = n;
    } else if (M == ninf || !(l > 0.0f)) {
      store4<DT>(out, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
      store4<DT>(out + 4, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
      if (seg == 0) p.o.lse[oid] = ninf;
    } else {
      float4 a0 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), a1 = a0;
      const float* mine = xo + row * L::XROW + seg * 8;
#pragma unroll 4
      for (int s = 0; s < C; ++s) {
        const float w = s_cw[s * rows_per + rr];
        const float* src = static_cast<const float*>(__cluster_map_shared_rank(mine, static_cast<unsigned>(s)));
        const float4 x0 = *reinterpret_cast<const float4*>(src);
        const float4 x1 = *reinterpret_cast<const float4*>(src + 4);
        a0 = make_float4(fmaf(w, x0.x, a0.x), fmaf(w, x0.y, a0.y), fmaf(w, x0.z, a0.z), fmaf(w, x0.w, a0.w));
        a1 = make_float4(fmaf(w, x1.x, a1.x), fmaf(w, x1.y, a1.y), fmaf(w, x1.z, a1.z), fmaf(w, x1.w, a1.w));
      }
      const float inv = 1.0f / l;
      store4<DT>(out, make_float4(a0.x * inv, a0.y * inv, a0.z * inv, a0.w * inv));
      store4<DT>(out + 4, make_float4(a1.x * inv, a1.y * inv, a1.z * inv, a1.w * inv));
      if (seg == 0) p.o.lse[oid] = (M + log2f(l)) * 0.69314718055994531f;
    }
  }
  cluster_sync_all();  // no CTA leaves while another still reads its shared memory
#endif
}

}  // namespace
}  // namespace msa::cuda
