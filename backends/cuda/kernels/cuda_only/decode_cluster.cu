// CUDA-only (sm_90) decode sparse_block_attention for the reference shapes: GQA group of
// 16 query heads, head dim 128, KV blocks of 128 tokens, bf16/f16 (the M3 configuration).
//
// Latency first. One thread-block cluster of C CTAs serves one (query token, KV head); CTA
// (rank r) takes E = ceil(k / C) of the k selected blocks, i.e. the (page, KV head) slabs
// of 32 KiB of K and 32 KiB of V, which are contiguous. Each slab is one "half": a whole
// rank's halves (up to NS - 1 of them, NS = 3 / 5 / 6 stages of 32 KiB) are requested at
// once with cp.async (16 bytes per thread and instruction, rows past the valid keys zero-
// filled by the copy: cache slack, NaN included, is never read), so a CTA has up to
// 160 KiB in flight from its first microsecond. 8 warps: warp w takes keys 16w..16w+15
// of every block, S = Q K^T and O += P V on mma.sync m16n8k16 (the 16 heads are M), an
// online softmax per warp, P rounded to the input dtype, O in registers. The 8 warps are
// combined in shared memory (fixed order), then the C ranks through distributed shared
// memory: after a cluster barrier rank r reads rows [r*16/C, (r+1)*16/C) of every rank's
// partial (O, max, sum) in rank order and writes those rows of out and lse once. A second
// cluster barrier keeps every CTA's shared memory alive until its readers are done.
// Deterministic (fixed merge order), no allocation, no host sync: graph-capturable.
// Programmatic dependent launch only with MSA_CUDA_DECODE_CLUSTER_PDL=1 (it measured
// slower or no faster here, see pdl_enabled).
//
// Cluster size: the largest power of two <= 16 (and <= the next power of two >= k) whose
// grid (groups x C CTAs, one per SM at most) fits the SMs. Where the occupancy calculator
// says fewer clusters of C than groups can be resident at once, the C ranks of a group run
// as plain CTAs and merge through global memory instead (merge_global; before session 5
// C was halved until the clusters fit, leaving SMs idle). B = 8 at the reference shapes:
// 32 groups x C = 4 (4 blocks per CTA, 128 CTAs, global merge: 30 of 32 clusters of 4
// fit); B = 1: 4 x 16 in clusters. MSA_CUDA_DECODE_CLUSTER_MERGE=1 / 2: clusters only
// (halving C) / global merge always.
// MSA_CUDA_DECODE_CLUSTER=0 turns this kernel off (the split-KV kernel of
// decode_attention.cu runs); MSA_CUDA_DECODE_CLUSTER_SIZE=n (1, 2, 4, 8, 16) forces C;
// MSA_CUDA_DECODE_CLUSTER_OCC=2 builds for two CTAs per SM (3 stages, q re-read from
// shared memory); MSA_CUDA_DECODE_CLUSTER_TMA=1 fills the stages by TMA tile loads on
// mbarriers instead of cp.async (checked, no faster: off by default, see tma_enabled);
// MSA_CUDA_DECODE_CLUSTER_LOG=1 prints the launch geometry. (The session-4 experiment
// MSA_CUDA_DECODE_CLUSTER_PREFETCH, L2 prefetches of the later slabs, measured slower and
// is gone: bench/NOTES.md.)
// Measured on the H200 (bench/NOTES.md, sessions 3-6): at B = 8, 1M (32 MiB) this kernel
// takes ~17 us under ncu (session 5: 20 us, before q was requested ahead of the slabs;
// 22 us with C = 2 clusters on 64 SMs), the v4 kernel 23 us, while loaders that only read
// the same slabs take ~10.5 us (msa-slab-probe): the per-CTA chain (ids, pages, slabs,
// in-order compute, merge) bounds it, not the bytes in flight. Tried in session 6 and
// dropped: stages fed by one bulk copy per 256-byte row on mbarriers (42 us: the copy
// engine's rate on small copies), a rescale slack in the online softmax (no change).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/kernels/cuda_only/hopper_probe.h"
#include "backends/cuda/kernels/cuda_only/hopper_ptx.cuh"
#include "backends/cuda/kernels/cuda_only/mma_sync.cuh"
#include "backends/cuda/kernels/cuda_only/tensor_map.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"

namespace msa::cuda {
namespace {
using namespace dec;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kBs = 128;                 // keys per KV block
constexpr int kD = 128;                  // head dim
constexpr int kGrp = 16;                 // query rows (heads of one GQA group)
constexpr int kRowB = kD * 2;            // bytes per K/V/Q row
constexpr int kHalf = kBs * kRowB;       // one K or V slab: 32 KiB
constexpr int kMaxE = 128;               // blocks per rank (k <= 128)
constexpr int kMaxC = 16;
constexpr int kMaxT = 512;               // larger calls keep the other kernels
static_assert(kWarps * 16 == kBs, "warp w owns keys 16w..16w+15 of a block");

// Global merge (C ranks that are not a hardware cluster): per-group arrival counters, one
// set per stream slot (concurrent launches on other streams must not share them).
constexpr int kGmSlots = 8;
constexpr int kGmPerSlot = 4096;                  // groups per launch in global-merge mode
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
  int slot = 0;  // this stream's counters: g_cl_ctr[slot][group] (indexed on the device)
  int guess_b = 0;   // NQ == B: query block qb is probably sequence qb
  float scale_log2 = 1.0f;
};

template <int NS>
struct ClLayout {
  static constexpr int Q_OFF = NS * kHalf;               // [16][256 B] q rows (swizzled)
  static constexpr int XROW = kD + 4;                    // floats per export row
  static constexpr int X_OFF = Q_OFF + kGrp * kRowB;     // [16][XROW] f32: this CTA's O
  static constexpr int ML_OFF = X_OFF + kGrp * XROW * 4; // [2][16]: its max (base 2), sum
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
__device__ void merge_global(const ClParams& cp, const float* xo, const float* xml, int64_t grp, int rank,
                             int64_t tok, int g, int& s_last) {
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
// OCC: CTAs per SM the kernel is built for. 1: q fragments in registers, up to 6 stages;
// 2: <= 128 registers (q fragments re-read from shared memory), 3 stages.
// TMA (OCC = 1 only): the halves land by TMA tile loads (tmk / tmv: the K and V caches as
// [pages x Hkv x 128 rows][128] matrices, two 64-column boxes of 128 rows per half, the
// 128-byte swizzle) issued by one thread, each completing on its stage's "full" mbarrier;
// a warp waits for the half it needs there and frees the stage on the "empty" mbarrier
// when done, so there is no block barrier per half and no per-thread copy instruction
// (session 6 profile: ~2 us of barrier waits and ~1 us of cp.async issue at B = 8). The
// whole 128-row slab is read; V rows past the valid keys are masked in registers. Off by
// default: no faster than the cp.async stages (tma_enabled).
template <int DT, int NS, int OCC, bool TMA>
__global__ void __launch_bounds__(kThreads, OCC)
    cluster_decode_kernel(const __grid_constant__ CUtensorMap tmk, const __grid_constant__ CUtensorMap tmv,
                          const ClParams cp) {
  static_assert(!TMA || OCC == 1, "the TMA stages hold q in registers");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters, TMA: sm_90 only (the launch asks hopper_code_present)
#else
  using L = ClLayout<NS>;
  constexpr int kPanelRows = TMA ? kBs : 0;  // tile_chunk layout of the stages
  const SparseParams& p = cp.sp;
  using T = typename Elem<DT>::T;
  extern __shared__ __align__(128) char smem_raw[];
  // TMA's 128-byte swizzle repeats every 1024 bytes: the stages start 1024-aligned (the
  // launch adds 1024 bytes of slack).
  char* const smem = TMA ? smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u) : smem_raw;
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  __shared__ int s_qblock[5];  // locate_qblock_warp's answer
  __shared__ int s_page[kMaxE], s_nk[kMaxE];  // this rank's blocks: page, keys to use (0: none)
  __shared__ float s_m[kWarps][kGrp], s_l[kWarps][kGrp];
  __shared__ float s_cm[kGrp], s_cl[kGrp], s_cw[kGrp];  // cluster merge: [rank][row] (C x 16/C)
  __shared__ float s_fm[kGrp], s_fl[kGrp];
  __shared__ int s_last;
  __shared__ __align__(8) uint64_t s_bar[TMA ? 2 * NS : 1];  // TMA: full[NS], then empty[NS]

  const float ninf = __int_as_float(0xff800000u);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int C = cp.C;
#if __CUDA_ARCH__ >= 900
  if constexpr (TMA) {
    if (tid == 0) {  // published to the other warps by the barriers before the first copy
      for (int i = 0; i < NS; ++i) {
        hopper::mbar_init(smem_u32(&s_bar[i]), 1);            // the issuing thread + the bytes
        hopper::mbar_init(smem_u32(&s_bar[NS + i]), kWarps);  // one arrival per warp
      }
      hopper::fence_mbar_init();
    }
  }
#endif
  const int rank = static_cast<int>(blockIdx.x % static_cast<unsigned>(C));
  int64_t x = blockIdx.x / static_cast<unsigned>(C);
  const int rc = static_cast<int>(x % p.nrc);
  x /= p.nrc;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t qb = x / p.Hkv;
  // With programmatic launch the block gets here (parameters read) while the previous
  // kernel still runs; from here on it reads memory that kernel may write.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif

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
  // last, and the first half could not be consumed before them (session 6 profile).
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
  // TMA, thread 0: half h (< nh) into stage h % NS; an unused block only completes the
  // stage's phase (no bytes).
  auto issue_tma = [&](int h) {
#if __CUDA_ARCH__ >= 900
    const int j = h >> 1, st = h % NS;
    const uint32_t full = smem_u32(&s_bar[st]), dst = sbase + st * kHalf;
    if (s_nk[j] > 0) {
      hopper::mbar_arrive_expect_tx(full, kHalf);
      const int row0 = (s_page[j] * p.Hkv + g) * kBs;  // < 2^31: checked by the launch
      const void* map = (h & 1) ? static_cast<const void*>(&tmv) : static_cast<const void*>(&tmk);
      hopper::tma_load_2d(dst, map, 0, row0, full);
      hopper::tma_load_2d(dst + kBs * 128, map, 64, row0, full);
    } else {
      hopper::mbar_arrive(full);
    }
#endif
  };
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
  if constexpr (TMA) {
    if (tid == 0)
      for (int h = 0; h < min(NS, nh); ++h) issue_tma(h);
  } else {
#pragma unroll
    for (int s = 0; s < NS - 1; ++s) issue(s);
  }

  // ---- q rows -> shared (swizzled) -> A fragments ----
  *reinterpret_cast<uint4*>(smem + L::Q_OFF + q_r * kRowB + ((q_ch ^ (q_r & 7)) << 4)) = q_val;
  __syncthreads();
  constexpr bool kHoldQ = OCC == 1;
  uint32_t qa[kHoldQ ? kD / 16 : 1][4];
  if constexpr (kHoldQ) load_q_frags<kD>(sbase + L::Q_OFF, lane, kD / 16, qa);

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
    if constexpr (TMA) {
#if __CUDA_ARCH__ >= 900
      hopper::mbar_wait(smem_u32(&s_bar[st]), static_cast<uint32_t>(h / NS) & 1u);  // half h has landed
#endif
    } else {
      cp_async_wait<NS - 2>();
      __syncthreads();  // half h has landed for every thread; stage (h - 1) % NS is free
      issue(h + NS - 1);
    }
    const int nk = s_nk[h >> 1];
    const uint32_t buf = sbase + st * kHalf;
    if ((h & 1) == 0) {
      act = kb < nk;
      if (act) {  // one token: rows gq and gq + 8 see the same keys
        float sacc[2][4];
        if constexpr (kHoldQ) warp_qk<DT, kD, kPanelRows>(qa, buf, kb, lane, kD / 16, sacc);
        else warp_qk_smem_q<DT, kD>(sbase + L::Q_OFF, buf, kb, lane, kD / 16, sacc);
        online_softmax<DT, kD>(sacc, [&](int kw, int) { return kb + kw < nk; }, cp.scale_log2, m_run, l_run, o, pa,
                               lane);
      }
    } else if (act) {
      warp_pv<DT, kD, kPanelRows, TMA>(pa, buf, kb, lane, kD / 16, o, nk);
    }
#if __CUDA_ARCH__ >= 900
    if constexpr (TMA) {
      __syncwarp();  // every lane's reads of the stage are done
      if (lane == 0) hopper::mbar_arrive(smem_u32(&s_bar[NS + st]));
      if (tid == 0 && h + NS < nh) {  // refill once every warp has freed the stage
        hopper::mbar_wait(smem_u32(&s_bar[NS + st]), static_cast<uint32_t>(h / NS) & 1u);
        issue_tma(h + NS);
      }
    }
#endif
  }
  if constexpr (!TMA) cp_async_wait<0>();
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
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

bool cluster_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER", 1) != 0;
  return on;
}
int forced_cluster_size() {
  static const int c = env_int("MSA_CUDA_DECODE_CLUSTER_SIZE", 0);
  return (c == 1 || c == 2 || c == 4 || c == 8 || c == 16) ? c : 0;
}
// Programmatic dependent launch: off unless MSA_CUDA_DECODE_CLUSTER_PDL=1. On the H200
// (second run, bench/NOTES.md v5) B = 8 at 1M took 43.4 us queued with it and 27.8
// without (B = 1: 42.5 / 27.7), while the v4 kernel gains 1-2 us from it. Session 6, with
// the wait after the parameter math: no difference at B = 1 or 8 (0.018-0.019 ms queued).
bool pdl_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER_PDL", 0) != 0 && env_int("MSA_CUDA_DECODE_PDL", 1) != 0;
  return on;
}
// Stages fed by cp.async and a block barrier per half (the default) or by TMA tile loads
// on mbarriers (MSA_CUDA_DECODE_CLUSTER_TMA=1). Both pass every check (session 6), but the
// TMA stages measured no faster: B = 8, 1M 17.6-18.1 us against 17.1-17.2, B = 1 the
// same; the barrier waits they remove were waits for data. Two CTAs per SM always use
// cp.async.
bool tma_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER_TMA", 0) != 0;
  return on;
}
// The K and V caches as TMA maps ([P x Hkv x 128 rows][128], boxes of 64 x 128, 128-byte
// swizzle); false (the cp.async stages run) when they cannot be encoded, e.g. past 2^31
// rows (TMA row coordinates are int32).
bool make_kv_maps(const SparseParams& sp, hal::DType dt, CUtensorMap& mk, CUtensorMap& mv) {
  const int64_t rows = sp.bt.P * sp.Hkv * int64_t{kBs};
  const CUtensorMapDataType t = dt == hal::DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return make_map_sw128(&mk, sp.kc, rows, kD, kBs, t) && make_map_sw128(&mv, sp.vc, rows, kD, kBs, t);
}
// CTAs per SM the kernel is built for (1 or 2).
int occupancy_mode() {
  static const int n = env_int("MSA_CUDA_DECODE_CLUSTER_OCC", 1) == 2 ? 2 : 1;
  return n;
}
// How the C ranks of a group merge: 0 (auto) through distributed shared memory when the
// clusters all fit at once, else through global memory at the same C (plain CTAs: every
// SM busy instead of fewer ranks per cluster); 1 always clusters (lowering C until they
// fit, the session-4 behaviour); 2 always global memory.
int merge_mode() {
  static const int m = static_cast<int>(
      parse_env_int("MSA_CUDA_DECODE_CLUSTER_MERGE", std::getenv("MSA_CUDA_DECODE_CLUSTER_MERGE"), 0, 0, 2));
  return m;
}
// MSA_CUDA_DECODE_CLUSTER_LOG=1: each new launch geometry and, every 4096 launches, the
// mean host time of the launch call, on stderr.
bool log_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER_LOG", 0) != 0;
  return on;
}

// Whether the driver accepts programmatic launch together with clusters: -1 not known yet,
// 1 yes, 0 refused. Only an uncaptured launch may find out: a refused launch inside a
// stream capture would invalidate the capture.
std::atomic<int> pdl_with_clusters{-1};

// Stages for E blocks per rank: every half in flight at once where it fits (2E + 1); 3
// for two CTAs per SM.
int stages_for(int E, int occ) { return occ == 2 || E == 1 ? 3 : (E == 2 ? 5 : 6); }

// Runs fn(kernel, dynamic smem bytes) with the instantiation for (dt, NS, occ, tma); TMA
// stages only with one CTA per SM (+ 1024 bytes to align them).
template <class F>
void with_kernel(hal::DType dt, int NS, int occ, bool tma, F&& fn) {
  const auto pick = [&](auto dt_tag) {
    constexpr int DT = decltype(dt_tag)::value;
    if (occ == 2) fn(&cluster_decode_kernel<DT, 3, 2, false>, ClLayout<3>::BYTES);
    else if (tma && NS == 3) fn(&cluster_decode_kernel<DT, 3, 1, true>, ClLayout<3>::BYTES + 1024);
    else if (tma && NS == 5) fn(&cluster_decode_kernel<DT, 5, 1, true>, ClLayout<5>::BYTES + 1024);
    else if (tma) fn(&cluster_decode_kernel<DT, 6, 1, true>, ClLayout<6>::BYTES + 1024);
    else if (NS == 3) fn(&cluster_decode_kernel<DT, 3, 1, false>, ClLayout<3>::BYTES);
    else if (NS == 5) fn(&cluster_decode_kernel<DT, 5, 1, false>, ClLayout<5>::BYTES);
    else fn(&cluster_decode_kernel<DT, 6, 1, false>, ClLayout<6>::BYTES);
  };
  if (dt == hal::DType::bf16) pick(std::integral_constant<int, kBF16>{});
  else pick(std::integral_constant<int, kF16>{});
}

using KernelPtr = void (*)(CUtensorMap, CUtensorMap, ClParams);

// Once per kernel and device: dynamic shared memory and non-portable cluster sizes.
void prepare(KernelPtr k, int smem, int device) {
  static std::mutex mu;
  static std::map<std::pair<KernelPtr, int>, bool> done;
  std::lock_guard<std::mutex> lock(mu);
  if (done[{k, device}]) return;
  MSA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  MSA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  done[{k, device}] = true;
}

// Clusters of C CTAs that can be resident at once (cached per kernel, C and device).
int max_clusters(KernelPtr k, int smem, int C, int device) {
  static std::mutex mu;
  static std::map<std::tuple<KernelPtr, int, int>, int> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find({k, C, device});
    if (it != cache.end()) return it->second;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(C));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(C);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, k, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it, treat as "does not fit"
    n = 0;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[{k, C, device}] = n;
  return n;
}

void log_launch(int64_t groups, int C, int E, int NS, int occ, bool tma, int fit, int smem, bool pdl, int gmerge,
                std::chrono::steady_clock::duration host) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int, int, int>, int> seen;
  static double sum_us = 0;
  static long n = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (seen[{groups, C, E, occ}]++ == 0)
    std::fprintf(stderr,
                 "decode_cluster: groups %lld, C %d, E %d, NS %d, %d CTA/SM, stages by %s, %d clusters fit, smem %d, pdl %d, "
                 "merge %s\n",
                 static_cast<long long>(groups), C, E, NS, occ, tma ? "TMA" : "cp.async", fit, smem, pdl ? 1 : 0,
                 gmerge ? "global" : "cluster");
  sum_us += std::chrono::duration<double, std::micro>(host).count();
  if (++n % 4096 == 0) std::fprintf(stderr, "decode_cluster: mean launch call %.2f us over %ld\n", sum_us / n, n);
}

}  // namespace

bool launch_decode_sparse_cluster(Stream& st, const SparseParams& sp, hal::DType dt) {
  const DeviceProps& pr = st.props();
  if (!cluster_enabled() || !pr.native_tier || pr.cc_major < 9) return false;
  if (!hopper_code_present(pr.index)) return false;  // a build without sm_90 code (e.g. 80 only)
  if (dt != hal::DType::bf16 && dt != hal::DType::f16) return false;
  if (sp.D != kD || sp.bt.Bs != kBs || sp.G != kGrp || sp.tpc != 1 || sp.k < 1 || sp.k > kMaxE) return false;
  if (sp.bt.T <= 0 || sp.bt.T > kMaxT || (sp.Hs != 1 && sp.Hs != sp.Hkv)) return false;
  const auto a16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!a16(sp.q) || !a16(sp.kc) || !a16(sp.vc) || !a16(sp.o.out)) return false;
  const int64_t groups = sp.NQ * sp.Hkv * sp.nrc;
  if (groups <= 0) return true;
  if (groups > INT32_MAX / kMaxC) return false;  // grid groups x C must fit gridDim.x (2^31 - 1)

  int kpow = 1;
  while (kpow < sp.k) kpow *= 2;
  const int occ = occupancy_mode();
  int C = forced_cluster_size();
  const bool forced = C != 0;
  if (!forced) {
    C = 1;
    while (C * 2 <= std::min(kMaxC, kpow) && groups * C * 2 <= int64_t{occ} * pr.sm_count) C *= 2;
  }
  ClParams p;
  p.sp = sp;
  p.guess_b = sp.NQ == sp.bt.B ? 1 : 0;
  p.scale_log2 = sp.scale * 1.4426950408889634f;
  const int mode = merge_mode();
  CUtensorMap mk{}, mv{};  // unused by the cp.async stages
  const bool tma = occ == 1 && tma_enabled() && make_kv_maps(sp, dt, mk, mv);
  // Global merge needs this stream's counters and groups that fit them.
  const int slot = mode == 1 || groups > kGmPerSlot ? -1 : stream_slot(st, kGmSlots);
  for (;;) {
    p.C = C;
    p.E = (sp.k + C - 1) / C;
    KernelPtr kern = nullptr;
    int smem = 0;
    with_kernel(dt, stages_for(p.E, occ), occ, tma, [&](KernelPtr k, int bytes) {
      kern = k;
      smem = bytes;
    });
    prepare(kern, smem, pr.index);
    const int fit = max_clusters(kern, smem, C, pr.index);
    const bool clusters_fit = fit > 0 && (forced || fit >= groups);
    p.gmerge = C > 1 && slot >= 0 && (mode == 2 || !clusters_fit) ? 1 : 0;
    if (!p.gmerge) {
      if (fit <= 0 && C == 1) return false;  // cannot launch at all: the other kernels run
      if (C > 1 && !clusters_fit) {
        C /= 2;  // fewer ranks per cluster place more easily
        continue;
      }
    } else {
      p.ws = static_cast<float*>(st.workspace(static_cast<size_t>(groups) * C * kGmStride * sizeof(float)));
      p.slot = slot;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(groups * C));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = static_cast<size_t>(smem);
    cfg.stream = st.native();
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = p.gmerge ? 1u : static_cast<unsigned>(C);  // global merge: plain CTAs
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    bool try_pdl = false;
    if (pdl_enabled()) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      MSA_CUDA_CHECK(cudaStreamIsCapturing(st.native(), &capture));
      const int known = pdl_with_clusters.load();
      try_pdl = known == 1 || (known == -1 && capture == cudaStreamCaptureStatusNone);
    }
    cfg.numAttrs = try_pdl ? 2 : 1;
    const auto t0 = std::chrono::steady_clock::now();
    cudaError_t err = cudaLaunchKernelEx(&cfg, kern, mk, mv, p);
    if (try_pdl) {
      if (err == cudaSuccess) {
        pdl_with_clusters.store(1);
      } else {
        // Refused: retry plain. Only when the plain launch works was it programmatic
        // launch with clusters that the driver refused: then launch plain from now on.
        (void)cudaGetLastError();
        cfg.numAttrs = 1;
        err = cudaLaunchKernelEx(&cfg, kern, mk, mv, p);
        if (err == cudaSuccess) pdl_with_clusters.store(0);
      }
    }
    MSA_CUDA_CHECK(err);
    MSA_CUDA_CHECK_LAUNCH();
    if (log_enabled())
      log_launch(groups, C, p.E, stages_for(p.E, occ), occ, tma, fit, smem, cfg.numAttrs == 2, p.gmerge,
                 std::chrono::steady_clock::now() - t0);
    return true;
  }
}

}  // namespace msa::cuda
