// indexer_score: block_score[qb][h][c] = max (or log-sum-exp) over the valid tokens s of
// KV block c of scale_i * qi[t][h] . ki[s] (* ki_scale[s]), maximised over the query
// block's tokens t; -inf where nothing is valid.
//
// Decode-first design: one warp streams one KV block (Bs x Di keys, contiguous) at a
// time with 16-byte loads (16 fp8 keys decoded branch-free; NVFP4: 8-byte loads of 16 keys,
// one scale group), NI loads in flight per lane; lanes split each key row into
// 16-byte chunks (CPR lanes per row) and hold qi for 4 heads in registers. The CPR
// partial dot products of NI rows x 4 heads are combined by a reduce-scatter butterfly
// (about 2 shuffles per row instead of 4 log2(CPR)), so each lane ends with a few finished
// (row, head) logits, pooled into per-lane running stats; a warp reduction per head at
// the block's end gives the score. The block max is pooled in-kernel: only
// [NQ][Hi][max_blocks] floats are written. No shared memory, no block barriers.
#include <cfloat>

#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/entries.h"
#include "backends/cuda/kernels/portable/indexer_batch.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"

namespace msa::MSA_GPU_NS {
namespace {

constexpr int kThreads = 256, kWarpsPerBlock = kThreads / kWarp, kHC = 4;

struct IndexerParams {
  Batch bt;
  const void* qi = nullptr;  // [T][Hi][Di]
  int qi_dt = 0;
  const void* ki = nullptr;            // [P][Bs][Di] ([P][Bs][Di/2] NVFP4 bytes)
  const float* ki_scale = nullptr;     // fp8 keys: [P][Bs] f32 or null
  const uint8_t* ki_scale8 = nullptr;  // NVFP4 keys: [P][Bs][Di/16] e4m3
  float* out = nullptr;                // [NQ][Hi][max_blocks]
  int Qb = 1;
  int64_t NQ = 0;
  int Hi = 1, Di = 0;
  float scale = 1.0f;
  bool pool_lse = false;
  int splits = 1;  // blocks of the grid per query block
};

// One butterfly stage: lanes with bit `o` set keep the upper half of v and send the
// lower half to their partner, which does the opposite; both add what they receive.
template <int HALF, int N>
__device__ __forceinline__ void rs_stage(float (&v)[N], int lane, int o) {
  const bool upper = (lane & o) != 0;
#pragma unroll
  for (int i = 0; i < HALF; ++i) {
    const float send = upper ? v[i] : v[i + HALF];
    const float keep = upper ? v[i + HALF] : v[i];
    v[i] = keep + __shfl_xor_sync(MSA_FULL_MASK, send, o, kWarp);
  }
}

// Key chunk loaded per lane: 16 bytes (16 fp8 keys, 8 bf16, 4 f32), or for NVFP4 8 bytes
// (16 keys: one scale group, so a lane's partial sums take one scale per row).
template <int KDT>
struct KeyLoad {
  using V = uint4;
  static constexpr int kBytes = 16;
  static __device__ __forceinline__ V zero() { return make_uint4(0, 0, 0, 0); }
  static __device__ __forceinline__ V load(const void* p) { return __ldg(static_cast<const uint4*>(p)); }
};
template <>
struct KeyLoad<kFP4> {
  using V = uint2;
  static constexpr int kBytes = 8;
  static __device__ __forceinline__ V zero() { return make_uint2(0, 0); }
  static __device__ __forceinline__ V load(const void* p) { return __ldg(static_cast<const uint2*>(p)); }
};

// e4m3 -> float * 2^-8, branch-free, two keys per 32-bit word: u holds the two bytes in
// the high byte of each 16-bit half; sign | (bits & 0x7f) << 7 is an f16 whose value is
// the e4m3 value / 2^8 (bias 15 vs 7), exact for every finite e4m3 including subnormals;
// the NaN pattern (magnitude 0x7f -> 0x3f80) gets bit 14 set by a carry trick (exponent
// all ones, mantissa != 0: an f16 NaN). The 2^8 is folded into qi by the caller. Plain
// integer ops (the compiler emits prmt/lop3), portable to HIP.
__device__ __forceinline__ uint32_t fp8x2_hi_to_f16x2(uint32_t u) {
  const uint32_t nan = (((u & 0x7f007f00u) + 0x01000100u) & 0x80008000u) >> 1;  // 0x4000 where |b| == 0x7f
  return (u & 0x80008000u) | ((u >> 1) & 0x3f803f80u) | nan;
}

// Unpacks 8 bytes of NVFP4 codes: 16 E2M1 values * 2^-14 (the group scale and the 2^14
// are applied by the caller).
template <int KDT, int E>
__device__ __forceinline__ void unpack_keys(const uint2& raw, float (&kf)[E]) {
  static_assert(KDT == kFP4 && E == 16, "8 bytes of NVFP4 codes");
  const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t h = e2m1x2_to_f16x2_tiny((w[i / 4] >> (8 * (i % 4))) & 0xffu);
    kf[2 * i] = f16_bits_to_f32(static_cast<uint16_t>(h & 0xffffu));
    kf[2 * i + 1] = f16_bits_to_f32(static_cast<uint16_t>(h >> 16));
  }
}

// Unpacks one 16-byte key chunk; fp8 values come out divided by 2^8 (see above).
template <int KDT, int E>
__device__ __forceinline__ void unpack_keys(const uint4& raw, float (&kf)[E]) {
  if constexpr (KDT == kFP8) {
    static_assert(E == 16, "16 fp8 keys per chunk");
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t h01 = fp8x2_hi_to_f16x2(((w[i] & 0xffu) << 8) | ((w[i] & 0xff00u) << 16));
      const uint32_t h23 = fp8x2_hi_to_f16x2(((w[i] & 0xff0000u) >> 8) | (w[i] & 0xff000000u));
      kf[4 * i + 0] = f16_bits_to_f32(static_cast<uint16_t>(h01 & 0xffffu));
      kf[4 * i + 1] = f16_bits_to_f32(static_cast<uint16_t>(h01 >> 16));
      kf[4 * i + 2] = f16_bits_to_f32(static_cast<uint16_t>(h23 & 0xffffu));
      kf[4 * i + 3] = f16_bits_to_f32(static_cast<uint16_t>(h23 >> 16));
    }
  } else {
    unpack16<KDT>(raw, kf);
  }
}

template <int KDT, int DI>
__global__ void __launch_bounds__(kThreads) indexer_kernel(IndexerParams p) {
  constexpr bool kNv = KDT == kFP4;  // NVFP4: 2 keys per byte, a scale per 16 (= E) dims
  using KT = typename Elem<kNv ? kFP8 : KDT>::T;
  using KL = KeyLoad<KDT>;
  using LV = typename KL::V;
  constexpr int E = kNv ? 16 : int(sizeof(LV) / sizeof(KT));  // elements per lane chunk
  constexpr int CPR = DI / E;                                 // lanes per key row
  static_assert(CPR >= 1 && CPR <= kWarp, "row must fit a warp");
  constexpr int RPI = kWarp / CPR;  // rows per load instruction
  // Loads in flight per lane: 8 x 16 bytes. (fp8: 16 keys per chunk hold 4 x 16 qi floats
  // per lane, ~186 registers, one block per SM, still 32 KiB in flight per SM; NI = 4
  // made ptxas spill at 128 registers.)
  constexpr int NI = 8;
  constexpr int N = NI * kHC;  // partial sums per lane
  static_assert(N >= CPR, "reduce-scatter needs N >= CPR");
  constexpr int NV = N / CPR;     // finished logits per lane per batch
  constexpr int ROWS = NI * RPI;  // rows per batch
  constexpr int LOG_CPR = CPR >= 32 ? 5 : CPR >= 16 ? 4 : CPR >= 8 ? 3 : CPR >= 4 ? 2 : CPR >= 2 ? 1 : 0;

  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int64_t qb = blockIdx.x / p.splits;
  const int split = blockIdx.x % p.splits;
  const int wid = split * kWarpsPerBlock + warp, nw = p.splits * kWarpsPerBlock;
  const int Bs = p.bt.Bs, MB = p.bt.max_blocks;
  const float ninf = -FLT_MAX * 2.0f;

  __shared__ int32_t s_cu[kBatchCache + 1], s_kv[kBatchCache];
  const Batch cbt = cache_batch(p.bt, s_cu, s_kv, kBatchCache);
  const QBlock q = locate_qblock(cbt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  const int nblk = q.ntok > 0 ? (q.kv + Bs - 1) / Bs : 0;
  const int plast = q.p0 + q.ntok - 1;
  const int clast = q.ntok > 0 ? min(nblk - 1, plast / Bs) : -1;  // later blocks are causal-masked

  const int cc = lane % CPR, rsub = lane / CPR;
  const bool col_ok = cc * E < p.Di;
  // Offset of this lane's finished values in the flattened (it, h) index space.
  int voff = 0;
#pragma unroll
  for (int s = 0; s < LOG_CPR; ++s)
    if (lane & (CPR >> (s + 1))) voff += N >> (s + 1);

  // fp8 keys are decoded as value / 2^8, NVFP4 codes as value / 2^14: fold the power of
  // two into qi (exact).
  const float qscale = KDT == kFP8 ? p.scale * 256.0f : kNv ? p.scale * 16384.0f : p.scale;
  float qv[kHC][E];
  int loaded_t = -1, loaded_h = -1;
  const int64_t row_bytes = kNv ? p.Di / 2 : int64_t{p.Di} * int64_t{sizeof(KT)};
  const int G = p.Di / 16;  // NVFP4 scale groups per row

  for (int c = wid; c < MB; c += nw) {
    float* orow = p.out + qb * int64_t{p.Hi} * MB + c;
    if (c > clast) {
      for (int h = lane; h < p.Hi; h += kWarp) orow[int64_t{h} * MB] = ninf;
      continue;
    }
    const int64_t page = page_of(p.bt, q.b, c);
    for (int h0 = 0; h0 < p.Hi; h0 += kHC) {
      float best[kHC];
#pragma unroll
      for (int h = 0; h < kHC; ++h) best[h] = ninf;
      if (page >= 0) {
        for (int ti = 0; ti < q.ntok; ++ti) {
          const int pos = q.p0 + ti;
          const int lim = min(min(q.kv - 1, pos) - c * Bs, Bs - 1);  // last valid row of the block for this token
          if (lim < 0) continue;
          const int t = q.t0 + ti;
          if (t != loaded_t || h0 != loaded_h) {
#pragma unroll
            for (int h = 0; h < kHC; ++h)
#pragma unroll
              for (int e = 0; e < E; ++e) {
                const int d = cc * E + e;
                qv[h][e] = (h0 + h < p.Hi && d < p.Di)
                               ? load_any(p.qi, p.qi_dt, (int64_t{t} * p.Hi + h0 + h) * p.Di + d) * qscale
                               : 0.0f;
              }
            loaded_t = t;
            loaded_h = h0;
          }
          float rm[kHC], rs[kHC], rnan[kHC];  // rnan: a valid NaN logit (the score is NaN)
#pragma unroll
          for (int h = 0; h < kHC; ++h) {
            rm[h] = ninf;
            rs[h] = 0.0f;
            rnan[h] = 0.0f;
          }
          const uint8_t* kb = static_cast<const uint8_t*>(p.ki) + page * Bs * row_bytes;
          for (int rb = 0; rb <= lim; rb += ROWS) {
            LV raw[NI];
            uint8_t gsc[NI];  // NVFP4: this lane's group scale of each row
#pragma unroll
            for (int it = 0; it < NI; ++it) {
              const int row = rb + it * RPI + rsub;
              const bool ok = row < Bs && col_ok;
              raw[it] = ok ? KL::load(kb + int64_t{row} * row_bytes + cc * KL::kBytes) : KL::zero();
              if constexpr (kNv) gsc[it] = ok ? __ldg(p.ki_scale8 + (page * Bs + row) * G + cc) : uint8_t{0};
            }
            float v[N];
#pragma unroll
            for (int it = 0; it < NI; ++it) {
              float kf[E];
              unpack_keys<KDT>(raw[it], kf);
              const float gs = kNv ? fp8_bits_to_f32(gsc[it]) : 1.0f;
#pragma unroll
              for (int h = 0; h < kHC; ++h) {
                float a = 0.0f;
#pragma unroll
                for (int e = 0; e < E; ++e) a = fmaf(qv[h][e], kf[e], a);
                v[it * kHC + h] = kNv ? a * gs : a;
              }
            }
            // Reduce-scatter across the CPR lanes of a row group.
            if constexpr (LOG_CPR >= 1) rs_stage<N / 2>(v, lane, CPR / 2);
            if constexpr (LOG_CPR >= 2) rs_stage<N / 4>(v, lane, CPR / 4);
            if constexpr (LOG_CPR >= 3) rs_stage<N / 8>(v, lane, CPR / 8);
            if constexpr (LOG_CPR >= 4) rs_stage<N / 16>(v, lane, CPR / 16);
            if constexpr (LOG_CPR >= 5) rs_stage<N / 32>(v, lane, CPR / 32);
#pragma unroll
            for (int j = 0; j < NV; ++j) {
              const int idx = voff + j, it = idx / kHC, hh = idx % kHC;
              const int row = rb + it * RPI + rsub;
              if (row > lim) continue;
              float l = v[j];
              if (p.ki_scale != nullptr) l *= p.ki_scale[page * Bs + row];
#pragma unroll
              for (int h = 0; h < kHC; ++h) {
                if (h != hh) continue;
                if (l != l) {
                  rnan[h] = 1.0f;
                } else if (p.pool_lse) {
                  const float m = fmaxf(rm[h], l);
                  rs[h] = rs[h] * expf(rm[h] - m) + expf(l - m);
                  rm[h] = m;
                } else {
                  rm[h] = fmaxf(rm[h], l);
                }
              }
            }
          }
#pragma unroll
          for (int h = 0; h < kHC; ++h) {
            const float m = warp_max(rm[h]);
            const bool nan = warp_max(rnan[h]) > 0.0f;
            float score = m;
            if (p.pool_lse) {
              const float sum = warp_sum(m == ninf ? 0.0f : rs[h] * expf(rm[h] - m));
              score = m == ninf ? ninf : m + logf(sum);
            }
            // NaN-propagating maximum over the query block's queries (docs/spec.md).
            best[h] = nan || best[h] != best[h] ? quiet_nan() : fmaxf(best[h], score);
          }
        }
      }
      if (lane < kHC && h0 + lane < p.Hi) {
        float b = best[0];
#pragma unroll
        for (int h = 1; h < kHC; ++h)
          if (lane == h) b = best[h];
        orow[int64_t{h0 + lane} * MB] = b;
      }
    }
  }
}

template <int KDT, int DI>
void launch(const IndexerParams& p, unsigned grid, cudaStream_t s) {
  indexer_kernel<KDT, DI><<<grid, kThreads, 0, s>>>(p);
}

}  // namespace

void indexer_score_portable(hal::Stream& s, const ops::IndexerScoreArgs& a) {
  if (a.NQ == 0) return;
  auto& st = gpu_stream(s);
  IndexerParams p;
  p.bt = indexer_batch(st, a);
  p.qi = a.qi.data<void>();
  p.qi_dt = dt_code(a.qi.dtype);
  p.ki = a.ki_cache.data<void>();
  const bool nvfp4 = a.ki_cache.dtype == hal::DType::fp4_e2m1x2;
  p.ki_scale = a.ki_scale.present() && !nvfp4 ? a.ki_scale.data<float>() : nullptr;
  p.ki_scale8 = nvfp4 ? a.ki_scale.data<uint8_t>() : nullptr;
  p.out = a.block_score.data<float>();
  p.Qb = a.Qb;
  p.NQ = a.NQ;
  p.Hi = static_cast<int>(a.qi.dim(1));
  p.Di = static_cast<int>(a.qi.dim(2));
  p.scale = a.scale;
  p.pool_lse = a.pool == ops::Pool::lse;
  if (p.bt.max_blocks == 0) return;
  p.splits = indexer_splits(st, a.NQ, p.bt.max_blocks, kWarpsPerBlock);
  const unsigned grid = static_cast<unsigned>(a.NQ * p.splits);
  const bool small = p.Di <= 64;
  switch (a.ki_cache.dtype) {
    case hal::DType::bf16:
      small ? launch<kBF16, 64>(p, grid, st.native()) : launch<kBF16, 128>(p, grid, st.native());
      break;
    case hal::DType::f32:
      small ? launch<kF32, 64>(p, grid, st.native()) : launch<kF32, 128>(p, grid, st.native());
      break;
    case hal::DType::fp8_e4m3:
      small ? launch<kFP8, 64>(p, grid, st.native()) : launch<kFP8, 128>(p, grid, st.native());
      break;
    case hal::DType::fp4_e2m1x2:
      small ? launch<kFP4, 64>(p, grid, st.native()) : launch<kFP4, 128>(p, grid, st.native());
      break;
    default:
      throw Error("cuda: indexer_score: unexpected ki_cache dtype");
  }
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::MSA_GPU_NS
