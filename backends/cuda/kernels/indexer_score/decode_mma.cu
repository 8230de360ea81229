// CUDA-only: indexer_score for one query per query block (Qb = 1: decode, multi-token
// decode, or a short batch) with the dot products on tensor cores (mma.sync m16n8k16, f32
// accumulate).
//
// Token groups: a grid item is a group of up to `tokens` consecutive tokens of one
// sequence (decode_groups in choose.h: 1 for plain decode; 2-8 at Hi = 4 for draft tokens
// or MTP), and the B operand's columns are the group's (token, head) pairs in NT 8-column
// tiles, so the group's tokens share one read and one decode of the keys: each decoded A
// fragment feeds NT mmas. A column counts a key row only up to its own token's position
// (the causal limit differs per token inside the group's last blocks).
//
// Why: the portable decode kernel reaches 87% of HBM bandwidth with bf16 keys but is
// issue-bound with fp8 keys (half the bytes, the same per-key FMA and shuffle work). Here
// a warp takes one KV block; each 16-key tile is the A operand (keys x dims) and the
// query's index heads the B operand (dims x 8 heads, Hi <= 8, zero-padded), so a key
// costs 1/16 of an mma per 16 dims and no shuffles until the block's end.
//
// Operand layout: the dot product sums over dims, so the dims of one k-step may be any 16
// dims as long as A and B agree. Lane (g = lane / 4, t = lane % 4) loads 16 contiguous
// bytes of key rows g and g + 8 (bf16: 8 dims, two k-steps; fp8: 16 dims, four k-steps)
// and uses them as its A fragments; the B fragments hold the same dims of qi for head g.
// fp8 keys become f16 exactly: on sm_89+ by the hardware cvt (one instruction per two
// keys), before that as value / 2^8 by a branch-free bit trick (the 2^8 goes into the
// scale); the softmax scale and the per-token ki_scale multiply the f32 result. A NaN in a
// key slot past kv_len only reaches its own row of the product, which is masked.
// NVFP4 keys (Di = 128): a lane's 16 bytes of a row are 32 dims in two scale groups. Each
// 32-bit word (8 dims, one group) gives four f16x2 operands, dims {i, i+4} of the word as
// e2m1 * 2^-14: the codes are placed as f16 high bytes s000eem0 (fp4_word: 8 integer-pipe
// instructions and 3 shifts on the FMA pipe for 8 codes), then multiplied by the group's
// e4m3 scale * 2^7 in one HMUL2 (the scale broadcast as an operand swizzle): exactly
// e2m1 * scale * 2^-7 (>= 2^-17, at most 21; f16 holds it exactly, subnormal at the low
// end); the 2^7 goes into the logit scale. The B fragments hold qi at the same dims. A
// step loads four tiles (4 KiB per warp in flight, as fp8's two), then computes them; max
// pooling with a positive scale pools the raw products and scales once per block. The
// kernel is bound by instruction issue and latency, not by the loads: ~185 instructions
// per 16-key tile, 120 of them decoding and scaling (docs/performance.md, "Indexer,
// decode"). fp8 steps take two 16-key tiles, their keys and scales loaded before any is
// used: with one tile (2 KiB per warp in flight, then a dependent ki_scale load) the fp8
// path is latency-bound at ~40% of bandwidth while bf16 (4 KiB per tile) runs at ~98%.
//
// Fused select (ops::indexer_topk): the grid gets one more thread block per selection
// row (query block x Hs) after the indexer's blocks. Each indexer block counts itself in
// on its query block's arrival counter once its scores are written; a row's select block
// waits for the count to reach the query block's indexer blocks, reads the row back from
// L2 and selects it with block_topk's one-block select (topk_select.cuh); the last select
// block of a query block resets its counters. The select blocks have the highest block
// indices, so they are dispatched after every indexer block and never hold a slot one of
// those needs (the waiting is the single-pass-scan pattern: on blocks dispatched earlier).
// This removes block_topk's launch and cold start from the decode layer.
#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <string>

#include "backends/cuda/check.h"
#include "backends/cuda/kernels/indexer_score/choose.h"
#include "backends/cuda/kernels/indexer_score/decode_mma.h"
#include "backends/cuda/kernels/indexer_score/max_nan.cuh"
#include "backends/cuda/kernels/portable/indexer_batch.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "backends/cuda/kernels/portable/topk_row.cuh"
#include "backends/cuda/kernels/portable/topk_select.cuh"
#include "hal/op_id.h"

namespace msa::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kFusedPer = 8;                  // scores per thread of a select block (at most; 4 for <= 1024)
constexpr int kFusedSlots = 8;                // streams with their own counters
constexpr int kFusedMaxNQ = kFusedTopkMaxNQ;  // query blocks per call (this kernel takes <= 64 queries)
static_assert(kFusedTopkMaxBlocks == kThreads * kFusedPer, "rows the fused select takes");

// Per query block counters, [slot][qb] each: indexer blocks that have written their
// scores, select blocks that are done. Zero at load; reset by the query block's last
// select block.
__device__ unsigned int g_fused_arrived[kFusedSlots * kFusedMaxNQ];
__device__ unsigned int g_fused_done[kFusedSlots * kFusedMaxNQ];

// The fused block_topk (null idx: scores only).
struct FusedTopk {
  int32_t* idx = nullptr;  // [NQ][Hs][k]
  int32_t* cnt = nullptr;  // [NQ][Hs]
  int slot = 0;            // this stream's counters: g_fused_*[slot][qb]
  int Hs = 1, k = 1, n_sink = 0, n_local = 1;
};

// Key formats of this kernel.
enum KeyKind : int { kKeyBf16 = 0, kKeyFp8 = 1, kKeyFp4 = 2 };

struct Params {
  Batch bt;
  const uint16_t* qi = nullptr;  // [T][Hi][Di] bf16 or f16 bits
  bool qi_f16 = false;
  const uint8_t* ki = nullptr;          // [P][Bs][Di] bf16 or fp8 bytes, [P][Bs][Di/2] NVFP4
  const float* ki_scale = nullptr;      // fp8: [P][Bs] or null
  const uint16_t* ki_scale8 = nullptr;  // NVFP4: [P][Bs][Di/16] e4m3, read as byte pairs
  float* out = nullptr;                 // [NQ][Hi][max_blocks]
  int64_t NQ = 0;
  int Hi = 1, Di = 0;
  float scale = 1.0f;
  bool pool_lse = false;
  bool raw_max = false;  // NVFP4: max pooling of the raw products, times the scale at the block's end
  int splits = 1;
  int tokens = 1;     // tokens per group (decode_groups)
  int ntiles = 1;     // 8-column mma tiles per group: the kernel's NT
  int64_t items = 0;  // groups in the grid (decode_groups)
  FusedTopk topk;
};

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// sm_89+: the hardware conversion, one instruction per two keys, exact (every e4m3 value,
// NaN included, is an f16 value). Keys keep their value: factor 1.
constexpr float kFp8Unit = 1.0f;
// Dims {0,1} and {2,3} of a word of four fp8 keys, as f16x2 (low half = lower dim).
__device__ __forceinline__ void fp8x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}
#else
// Before sm_89: two e4m3 bytes (in the high byte of each 16-bit half) -> f16x2 of
// value / 2^8; the NaN pattern (magnitude 0x7f) stays NaN. Same trick as the portable
// kernel; the 2^8 goes into the logit scale.
constexpr float kFp8Unit = 256.0f;
__device__ __forceinline__ uint32_t fp8x2_to_f16x2_div256(uint32_t u) {
  const uint32_t nan = (((u & 0x7f007f00u) + 0x01000100u) & 0x80008000u) >> 1;
  return (u & 0x80008000u) | ((u >> 1) & 0x3f803f80u) | nan;
}
__device__ __forceinline__ void fp8x4_to_f16x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  lo = fp8x2_to_f16x2_div256(__byte_perm(w, 0u, 0x1404));  // bytes 0, 1 -> high bytes of the halves
  hi = fp8x2_to_f16x2_div256(__byte_perm(w, 0u, 0x3424));  // bytes 2, 3
}
#endif

__device__ __forceinline__ uint32_t hmul2_bits(uint32_t a, uint32_t b) {
  uint32_t r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// Group scales (two e4m3 bytes) as f16x2 of scale * 2^7, exact (<= 448 * 2^7 < 65504; NaN
// stays NaN).
__device__ __forceinline__ uint32_t fp4_scales(uint32_t two) {
  uint32_t lo, hi;
  fp8x4_to_f16x2(two, lo, hi);
  constexpr uint32_t kMul = kFp8Unit == 1.0f ? 0x58005800u : 0x78007800u;  // f16x2 {2^7, 2^7} or {2^15, 2^15}
  return hmul2_bits(lo, kMul);
}

// Running pool of one head's logits: max, or (max, sum of exp) for log-sum-exp.
struct Pool {
  float m = -FLT_MAX * 2.0f, s = 0.0f;
  // Max pooling of unscaled logits, then scale() once: max(x) * s == max(x * s) for s > 0
  // (rounding is monotone; -inf stays -inf, NaN stays NaN: max_nan).
  __device__ __forceinline__ void max_raw(float x) { m = max_nan(m, x); }
  __device__ __forceinline__ void scale(float sc) { m *= sc; }
  __device__ __forceinline__ void add(float l, bool lse) {
    if (lse) {
      const float nm = max_nan(m, l);
      s = s * expf(m - nm) + expf(l - nm);
      m = nm;
    } else {
      m = max_nan(m, l);
    }
  }
  // Merges the 8 lanes that share lane % 4 (xor 4, 8, 16); returns the pooled score.
  __device__ __forceinline__ float finish(bool lse) {
    const float ninf = -FLT_MAX * 2.0f;
    float mm = m;
    for (int o = 4; o < 32; o <<= 1) mm = max_nan(mm, __shfl_xor_sync(0xffffffffu, mm, o));
    if (!lse) return mm;
    float ss = (m == ninf) ? 0.0f : s * expf(m - mm);
    for (int o = 4; o < 32; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    return mm == ninf ? ninf : mm + logf(ss);
  }
};

__device__ __forceinline__ unsigned load_acquire(const unsigned int* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// An indexer block's scores are written: count it in (release at gpu scope).
__device__ __forceinline__ void fused_arrive(const Params& p, int64_t qb) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(g_fused_arrived + p.topk.slot * kFusedMaxNQ + qb, 1u);
  }
}

// One row's select by a whole block: PER scores per thread (positions tid * PER ..),
// keys as block_topk makes them, the one-block select, the chosen blocks ascending.
template <int PER>
__device__ __forceinline__ void select_row(const float* srow, const RowInfo& ri, int k, int32_t* out, int32_t* cnt,
                                           SelScratch<kThreads>& sc) {
  const int tid = threadIdx.x;
  float sv[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = tid * PER + i;
    sv[i] = c < ri.nvalid ? __ldcg(srow + c) : 0.0f;
  }
  uint32_t key[PER];
  int32_t blk[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int c = tid * PER + i;
    key[i] = c < ri.nvalid ? select_key(ri, c, sv[i]) : 0u;
    blk[i] = c;
  }
  const unsigned take = select_top<PER>(key, k, sc);
  const int total = compact_taken<PER, int32_t>(take, blk, out, nullptr, nullptr, sc);
  for (int i = total + tid; i < k; i += kThreads) out[i] = -1;
  if (tid == 0) *cnt = total;
}

// A select block: row r = qb * Hs + h of block_idx / block_cnt, after the query block's
// `splits` indexer blocks have arrived. Hs == Hi: the indexer's rows are the select's.
__device__ __forceinline__ void fused_select_block(const Params& p, const Batch& cbt) {
  __shared__ SelScratch<kThreads> sc;
  const FusedTopk& f = p.topk;
  const int tid = threadIdx.x, MB = p.bt.max_blocks;
  const int64_t r = blockIdx.x - p.items * p.splits, qb = r / f.Hs;
  unsigned int* arrived = g_fused_arrived + f.slot * kFusedMaxNQ + qb;
  unsigned int* done = g_fused_done + f.slot * kFusedMaxNQ + qb;
  const QBlock q = locate_qblock(cbt, 1, qb, p.NQ, false);
  RowInfo ri;
  const int fixed = row_rule(q, p.bt.Bs, MB, f.k, f.n_sink, f.n_local, ri);
  int32_t* out = f.idx + r * f.k;
  if (fixed >= 0) {  // no select: blocks 0 .. fixed-1 (written before the wait: no score is read)
    for (int i = tid; i < f.k; i += kThreads) out[i] = i < fixed ? i : -1;
    if (tid == 0) f.cnt[r] = fixed;
  }
  if (tid == 0)
    while (load_acquire(arrived) < static_cast<unsigned>(p.splits)) __nanosleep(64);
  __syncthreads();
  if (fixed < 0) {  // rows of <= 1024 blocks (128K tokens at Bs = 128) with half the keys per thread
    if (ri.nvalid <= kThreads * 4)
      select_row<4>(p.out + r * MB, ri, f.k, out, f.cnt + r, sc);
    else
      select_row<kFusedPer>(p.out + r * MB, ri, f.k, out, f.cnt + r, sc);
  }
  if (tid == 0 && atomicAdd(done, 1u) == static_cast<unsigned>(f.Hs - 1)) {
    *arrived = 0u;  // every select block of qb has seen the arrivals: ready for the next launch
    *done = 0u;
  }
}

// NVFP4 (Di = 128): one step is NT tiles of 16 keys: this lane's 16 code bytes of rows g
// and g + 8 of each tile and their two group scales.
template <int NT>
struct Fp4Step {
  uint4 raw[NT][2];
  uint32_t gs[NT][2];
};

// Tiles past `lim` are neither loaded nor computed.
template <int NT>
__device__ __forceinline__ void fp4_load(const Params& p, int64_t page, int r0, int lim, int Bs, int g, int t,
                                         Fp4Step<NT>& st) {
  const uint8_t* kb = p.ki + page * Bs * int64_t{64} + t * 16;
  const uint16_t* gsc = p.ki_scale8 + page * Bs * int64_t{4} + t;
#pragma unroll
  for (int u = 0; u < NT; ++u) {
    if (r0 + 16 * u > lim) break;  // warp-uniform; rows stay inside the block
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = r0 + 16 * u + g + 8 * half;
      st.raw[u][half] = __ldg(reinterpret_cast<const uint4*>(kb + int64_t{row} * 64));
      st.gs[u][half] = __ldg(gsc + row * 4);
    }
  }
}

// d = (a | b) & c in one instruction (ptxas splits the or and the ands when the or is shared).
__device__ __forceinline__ uint32_t or_and(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xA8;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// The four f16x2 operands of a word of eight E2M1 codes (one scale group), e2m1 * 2^-14 each:
// op[i] = dims {i, i+4}. The codes of dims 2k+1 (high nibbles) and, after a shift by 4, of
// dims 2k (low nibbles) sit at bits 4..7 of byte k; (x >> 3 | x) puts sign at bit 7 and
// e, e, m at bits 3..1 (the f16 high byte s000eem0); bytes 1 and 3 are then masked in
// place, bytes 0 and 2 masked and moved up by 8. Eight integer-pipe instructions and three
// shifts (IMAD, on the FMA pipe) for eight codes.
__device__ __forceinline__ void fp4_word(uint32_t w, uint32_t (&op)[4]) {
  const uint32_t x = w & 0xf0f0f0f0u, xr = x >> 3;
  const uint32_t y = (w << 4) & 0xf0f0f0f0u, yr = y >> 3;
  op[3] = or_and(xr, x, 0x8e008e00u);
  op[1] = or_and(xr, x, 0x008e008eu) << 8;
  op[2] = or_and(yr, y, 0x8e008e00u);
  op[0] = or_and(yr, y, 0x008e008eu) << 8;
}

// a * {s.lo, s.lo} and a * {s.hi, s.hi}: the broadcast as an operand swizzle of the HMUL2.
__device__ __forceinline__ uint32_t hmul2_by_lo(uint32_t a, uint32_t s) {
  uint32_t r;
  asm("{\n.reg .b16 l, h;\n.reg .b32 ll;\nmov.b32 {l, h}, %2;\nmov.b32 ll, {l, l};\nmul.rn.f16x2 %0, %1, ll;\n}\n"
      : "=r"(r)
      : "r"(a), "r"(s));
  return r;
}
__device__ __forceinline__ uint32_t hmul2_by_hi(uint32_t a, uint32_t s) {
  uint32_t r;
  asm("{\n.reg .b16 l, h;\n.reg .b32 hh;\nmov.b32 {l, h}, %2;\nmov.b32 hh, {h, h};\nmul.rn.f16x2 %0, %1, hh;\n}\n"
      : "=r"(r)
      : "r"(a), "r"(s));
  return r;
}

// acc += one NVFP4 tile (rows g, g + 8) times qi (b: k-step s = dims {k, k+4} of word s / 2).
// Words 0, 1 of a row are group 2t (the low scale), words 2, 3 group 2t + 1.
// NT column tiles share the decoded keys.
template <int NT>
__device__ __forceinline__ void fp4_tile(const uint4 (&raw)[2], const uint32_t (&gs)[2],
                                         const uint32_t (&b)[NT][1][8][2], float (&acc)[NT][4]) {
  const uint32_t sc0 = fp4_scales(gs[0]), sc1 = fp4_scales(gs[1]);  // {group 2t, group 2t + 1} * 2^7
  const uint32_t w0[4] = {raw[0].x, raw[0].y, raw[0].z, raw[0].w};
  const uint32_t w1[4] = {raw[1].x, raw[1].y, raw[1].z, raw[1].w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t o0[4], o1[4];
    fp4_word(w0[j], o0);
    fp4_word(w1[j], o1);
    uint32_t a[4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // dims {2h, 2h+4} and {2h+1, 2h+5}
      a[0] = j < 2 ? hmul2_by_lo(o0[2 * h], sc0) : hmul2_by_hi(o0[2 * h], sc0);
      a[2] = j < 2 ? hmul2_by_lo(o0[2 * h + 1], sc0) : hmul2_by_hi(o0[2 * h + 1], sc0);
      a[1] = j < 2 ? hmul2_by_lo(o1[2 * h], sc1) : hmul2_by_hi(o1[2 * h], sc1);
      a[3] = j < 2 ? hmul2_by_lo(o1[2 * h + 1], sc1) : hmul2_by_hi(o1[2 * h + 1], sc1);
#pragma unroll
      for (int n = 0; n < NT; ++n) mma_f16(acc[n], a, b[n][0][2 * j + h][0], b[n][0][2 * j + h][1]);
    }
  }
}

// A group of `n` consecutive tokens of sequence b (packed tokens t0 .., positions p0 ..):
// grid item `item` of a call whose sequences are cut into groups of `tokens` tokens, in
// sequence order (tokens = 1: item = query block, as locate_qblock with Qb = 1). Scans
// the sequences like locate_qblock; n = 0 when not found. With check_nq, flags kErrNQ
// when the tokens (Qb = 1: the query blocks) do not add up to NQ.
struct Group {
  int b = -1, t0 = 0, n = 0, p0 = 0, kv = 0;
};
__device__ __forceinline__ Group locate_group(const Batch& bt, int tokens, int64_t item, int64_t NQ, bool check_nq) {
  Group r;
  int64_t acc = 0, nq = 0;
  for (int b = 0; b < bt.B; ++b) {
    const Seq s = load_seq(bt, b, check_nq);
    const int q = s.ok ? s.qlen : 0;
    const int ng = (q + tokens - 1) / tokens;
    if (r.b < 0 && item < acc + ng) {
      const int j = static_cast<int>(item - acc) * tokens;
      r.b = b;
      r.t0 = s.q0 + j;
      r.n = min(tokens, q - j);
      r.p0 = s.kv - q + j;
      r.kv = s.kv;
      if (!check_nq) return r;
    }
    acc += ng;
    nq += q;
  }
  if (check_nq && nq != NQ) raise_flag(bt.flag, kErrNQ, bt.op);
  return r;
}

// KK: the key format (KeyKind; bf16 keys need bf16 qi). DI: 64 or 128 (NVFP4: 128).
// NT: 8-column mma tiles per group; column c of the group is token c / Hi, head c % Hi.
template <int KK, int DI, int NT>
__global__ void __launch_bounds__(kThreads, NT >= 4 ? 1 : 2) indexer_mma_kernel(Params p) {
  constexpr bool KFP8 = KK == kKeyFp8, KFP4 = KK == kKeyFp4;
  constexpr int NT4 = 4;  // NVFP4 tiles per step (4 KiB per warp in flight, as fp8's two tiles)
  constexpr int RB = KFP4 ? DI / 2 : KFP8 ? DI : 2 * DI;  // bytes per key row
  constexpr int DPL = KFP4 ? 32 : KFP8 ? 16 : 8;          // dims per 16-byte load
  constexpr int NL = DI / (4 * DPL);                      // loads per row per lane (4 lanes per row)
  constexpr int KS = DPL / 4;                             // k-steps per load (4 dims per lane per k-step)
  // 16-key tiles per step (two bf16 tiles measure no faster: docs/performance.md)
  constexpr int KT = KFP8 ? 2 : 1;
  static_assert(!KFP4 || DI == 128, "NVFP4 keys: Di = 128");
  static_assert(NL >= 1 && NL * 4 * DPL == DI, "Di must be a multiple of 4 x 16 bytes");
  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  if (p.topk.idx != nullptr && blockIdx.x >= p.items * p.splits) {
    fused_select_block(p, cbt);
    return;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int64_t item = blockIdx.x / p.splits;
  const int wid = (blockIdx.x % p.splits) * kWarps + warp, nw = p.splits * kWarps;
  const int Bs = p.bt.Bs, MB = p.bt.max_blocks;
  const float ninf = -FLT_MAX * 2.0f;
  const Group q = locate_group(cbt, p.tokens, item, p.NQ, blockIdx.x == 0);
  const int nblk = q.n > 0 ? (q.kv + Bs - 1) / Bs : 0;
  const int plast = q.p0 + q.n - 1;  // the group's last position (<= kv - 1)
  const int clast = q.n > 0 ? min(nblk - 1, plast / Bs) : -1;

  // B fragments: qi of this lane's column 8 j + g at this lane's dims, per load l and
  // k-step s: dims l * 4 * DPL + t * DPL + 4 s + {0, 1} (b0) and + {2, 3} (b1).
  uint32_t b[NT][NL][KS][2];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int col = 8 * j + g, tok = col / p.Hi;
    const bool col_ok = tok < q.n;
    const uint16_t* qrow = p.qi + (int64_t{q.t0 + (col_ok ? tok : 0)} * p.Hi + (col_ok ? col % p.Hi : 0)) * p.Di;
#pragma unroll
    for (int l = 0; l < NL; ++l)
#pragma unroll
      for (int s = 0; s < KS; ++s)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          // NVFP4: k-step s holds dims {k, k+4} (b0: k = 2 (s % 2), b1: k + 1) of word s / 2.
          const int d = KFP4 ? t * DPL + 8 * (s / 2) + 2 * (s % 2) + h : l * 4 * DPL + t * DPL + 4 * s + 2 * h;
          const int d2 = KFP4 ? d + 4 : d + 1;
          uint32_t lo = col_ok ? qrow[d] : 0u, hi = col_ok ? qrow[d2] : 0u;
          if ((KFP8 || KFP4) && !p.qi_f16) {  // bf16 qi -> f16 (exact in f16's normal range)
            lo = f32_to_f16_bits(bf16_bits_to_f32(static_cast<uint16_t>(lo)));
            hi = f32_to_f16_bits(bf16_bits_to_f32(static_cast<uint16_t>(hi)));
          }
          b[j][l][s][h] = lo | (hi << 16);
        }
  }
  // This lane's accumulator columns 8 j + 2 t + e: their token's position (-1: no token).
  int cpos[NT][2];
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = (8 * j + 2 * t + e) / p.Hi;
      cpos[j][e] = tok < q.n ? q.p0 + tok : -1;
    }
  const float lscale = KFP4 ? p.scale * 128.0f : KFP8 ? p.scale * kFp8Unit : p.scale;

  for (int c = wid; c < MB; c += nw) {
    // Rows of block c: up to `lim` for the last token, up to `lim0` for every token.
    const int lim = c <= clast ? min(plast - c * Bs, Bs - 1) : -1;
    const int lim0 = q.p0 - c * Bs;
    const int64_t page = lim >= 0 ? page_of(p.bt, q.b, c) : -1;
    // Set member by member: nvcc 13.0 initialised only the first row of a default-
    // constructed Pool[NT][2] from the default member initialisers (m = 0 in the others).
    Pool pool[NT][2];
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        pool[j][e].m = ninf;
        pool[j][e].s = 0.0f;
      }
    // Row `row` of block c counts for column (j, e) when its position is at most the token's.
    const auto take = [&](int row, int j, int e) { return c * Bs + row <= cpos[j][e]; };
    if constexpr (KFP4) {  // block by block: a step's loads, then its tiles
      for (int r0 = 0; page >= 0 && r0 <= lim; r0 += 16 * NT4) {
        Fp4Step<NT4> st;
        fp4_load(p, page, r0, lim, Bs, g, t, st);
#pragma unroll
        for (int u = 0; u < NT4; ++u) {
          if (r0 + 16 * u > lim) break;
          float acc[NT][4];
#pragma unroll
          for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
          fp4_tile<NT>(st.raw[u], st.gs[u], b, acc);
          const bool whole = r0 + 16 * u + 15 <= lim0;  // every row counts for every token
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            if (p.raw_max && whole) {  // no row checks, no scaling
              pool[j][0].max_raw(max_nan(acc[j][0], acc[j][2]));
              pool[j][1].max_raw(max_nan(acc[j][1], acc[j][3]));
              continue;
            }
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int row = r0 + 16 * u + g + 8 * half;
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                if (!whole && !take(row, j, e)) continue;
                if (p.raw_max)
                  pool[j][e].max_raw(acc[j][2 * half + e]);
                else
                  pool[j][e].add(acc[j][2 * half + e] * lscale, p.pool_lse);
              }
            }
          }
        }
      }
      if (p.raw_max) {
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          pool[j][0].scale(lscale);
          pool[j][1].scale(lscale);
        }
      }
    } else if (page >= 0) {
      const uint8_t* kb = p.ki + page * Bs * int64_t{RB};
      const float* ksc = p.ki_scale != nullptr ? p.ki_scale + page * Bs : nullptr;
      // KT tiles of 16 keys per step, all loads (keys and their scales) issued before any
      // use: fp8 tiles are half the bytes of bf16 ones, so two of them keep as many bytes
      // in flight per warp (the fp8 path was latency-bound with one).
      for (int r0 = 0; r0 <= lim; r0 += 16 * KT) {
        uint4 raw[KT][2][NL];
        float ks[KT][2];
#pragma unroll
        for (int u = 0; u < KT; ++u) {
          const bool tile = r0 + 16 * u <= lim;  // warp-uniform; rows stay inside the block
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = r0 + 16 * u + g + 8 * half;
#pragma unroll
            for (int l = 0; l < NL; ++l)
              raw[u][half][l] = tile ? __ldg(reinterpret_cast<const uint4*>(kb + int64_t{row} * RB +
                                                                            (l * 4 * DPL + t * DPL) * RB / DI))
                                     : make_uint4(0u, 0u, 0u, 0u);
            ks[u][half] = (tile && ksc != nullptr) ? __ldg(ksc + row) : 1.0f;
          }
        }
#pragma unroll
        for (int u = 0; u < KT; ++u) {
          if (r0 + 16 * u > lim) break;
          float acc[NT][4];
#pragma unroll
          for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
          for (int l = 0; l < NL; ++l) {
            const uint32_t w0[4] = {raw[u][0][l].x, raw[u][0][l].y, raw[u][0][l].z, raw[u][0][l].w};
            const uint32_t w1[4] = {raw[u][1][l].x, raw[u][1][l].y, raw[u][1][l].z, raw[u][1][l].w};
#pragma unroll
            for (int s = 0; s < KS; ++s) {
              uint32_t a[4];
              if constexpr (KFP8) {  // word s: dims 4s..4s+3 of this lane's 16
                fp8x4_to_f16x2(w0[s], a[0], a[2]);
                fp8x4_to_f16x2(w1[s], a[1], a[3]);
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_f16(acc[j], a, b[j][l][s][0], b[j][l][s][1]);
              } else {  // words 2s, 2s+1: dims 4s..4s+3 of this lane's 8
                a[0] = w0[2 * s];
                a[1] = w1[2 * s];
                a[2] = w0[2 * s + 1];
                a[3] = w1[2 * s + 1];
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_bf16(acc[j], a, b[j][l][s][0], b[j][l][s][1]);
              }
            }
          }
          // acc[j]: rows (keys) g and g + 8, columns 8 j + 2t and 8 j + 2t + 1.
          const bool whole = r0 + 16 * u + 15 <= lim0;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = r0 + 16 * u + g + 8 * half;
            if (row > lim) continue;
            const float f = lscale * ks[u][half];
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (whole || take(row, j, e)) pool[j][e].add(acc[j][2 * half + e] * f, p.pool_lse);
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float sc = pool[j][e].finish(p.pool_lse);
        const int col = 8 * j + 2 * t + e, tok = col / p.Hi;
        const int64_t qb = int64_t{q.t0} + tok;  // Qb = 1: a token's query block is its packed index
        if (g == 0 && tok < q.n && qb < p.NQ) p.out[(qb * p.Hi + col % p.Hi) * MB + c] = page >= 0 ? sc : ninf;
      }
  }
  if (p.topk.idx != nullptr) fused_arrive(p, item);
}

template <int KK, int DI, int NT>
void launch(const Params& p, unsigned grid, cudaStream_t s) {
  indexer_mma_kernel<KK, DI, NT><<<grid, kThreads, 0, s>>>(p);
}

// Binds `a` (a call choose_indexer_score routes here).
Params decode_params(Stream& st, const ops::IndexerScoreArgs& a) {
  Params p;
  p.bt = indexer_batch(st, a);
  p.qi = a.qi.data<uint16_t>();
  p.qi_f16 = a.qi.dtype == hal::DType::f16;
  p.ki = a.ki_cache.data<uint8_t>();
  const bool nvfp4 = a.ki_cache.dtype == hal::DType::fp4_e2m1x2;
  p.ki_scale = a.ki_scale.present() && !nvfp4 ? a.ki_scale.data<float>() : nullptr;
  p.ki_scale8 = nvfp4 ? a.ki_scale.data<uint16_t>() : nullptr;
  p.out = a.block_score.data<float>();
  p.NQ = a.NQ;
  p.Hi = static_cast<int>(a.qi.dim(1));
  p.Di = static_cast<int>(a.qi.dim(2));
  p.scale = a.scale;
  p.pool_lse = a.pool == ops::Pool::lse;
  // Max pooling with a positive scale (NVFP4's logit scale scale * 2^7 finite) pools the
  // raw products and scales once.
  p.raw_max = nvfp4 && !p.pool_lse && a.scale > 0.0f && a.scale * 128.0f <= FLT_MAX;
  const DecodeGroups dg = decode_groups(indexer_shape(a), st.tuning());
  p.tokens = dg.tokens;
  p.items = dg.items;
  p.ntiles = dg.ntiles;
  // The split fills the machine for the groups a batch of equal q_len has; the grid's
  // other items (ragged batches' partial groups) find no tokens and return.
  p.splits = indexer_splits(st, dg.full, p.bt.max_blocks, kWarps);
  return p;
}

template <int KK, int DI>
void launch_tiles(const Params& p, unsigned grid, cudaStream_t s) {
  if (p.ntiles == 4)
    launch<KK, DI, 4>(p, grid, s);
  else if (p.ntiles == 2)
    launch<KK, DI, 2>(p, grid, s);
  else
    launch<KK, DI, 1>(p, grid, s);
}

// The indexer's items x splits blocks, then `select_blocks` (fused rows; 0 unfused).
void launch_decode(Stream& st, const Params& p, hal::DType kd, int64_t select_blocks) {
  const unsigned grid = static_cast<unsigned>(p.items * p.splits + select_blocks);
  if (kd == hal::DType::fp4_e2m1x2)
    launch_tiles<kKeyFp4, 128>(p, grid, st.native());
  else if (kd == hal::DType::fp8_e4m3)
    p.Di == 64 ? launch_tiles<kKeyFp8, 64>(p, grid, st.native()) : launch_tiles<kKeyFp8, 128>(p, grid, st.native());
  else
    p.Di == 64 ? launch_tiles<kKeyBf16, 64>(p, grid, st.native()) : launch_tiles<kKeyBf16, 128>(p, grid, st.native());
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void indexer_decode_mma(Stream& st, const ops::IndexerScoreArgs& a) {
  launch_decode(st, decode_params(st, a), a.ki_cache.dtype, 0);
}

bool launch_mma_decode_indexer_topk(hal::Stream& s, const ops::IndexerScoreArgs& a, const ops::BlockTopkArgs& t) {
  auto& st = gpu_stream(s);
  const int64_t Hs = t.block_score.dim(1);
  if (choose_indexer_topk(indexer_shape(a), Hs, st.props(), st.tuning()) != IndexerTopkKernel::fused_decode)
    return false;
  const int slot = stream_slot(st, kFusedSlots);
  if (slot < 0) return false;  // the counters are taken by other streams: the ops run separately
  Params p = decode_params(st, a);
  p.topk.idx = t.block_idx.data<int32_t>();
  p.topk.cnt = t.block_cnt.data<int32_t>();
  p.topk.Hs = static_cast<int>(Hs);
  p.topk.k = t.k;
  p.topk.n_sink = t.n_sink;
  p.topk.n_local = t.n_local;
  p.topk.slot = slot;
  launch_decode(st, p, a.ki_cache.dtype, a.NQ * Hs);
  return true;
}

}  // namespace msa::cuda
