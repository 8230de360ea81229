// Shared-memory tiles of the tiled attention backward (FlashAttention-2 style, plain FMA,
// deterministic): a tile of kTileKeys keys (K and V transposed, dims x keys, padded to
// kTileKeys + 1 floats per dim so that lanes walking either keys or dims hit distinct
// banks) against a tile of BQ query rows (q and dout row-major, DP floats per row, plus
// lse and delta). score_tile turns them into P = exp(scale * q.k - lse) and
// dS = scale * P * (dout.v - delta) (BQ x kTileKeys, row-major), from which the callers
// accumulate dV += P^T dout, dK += dS^T q (per key) or dQ += dS K (per query) in
// registers, each output element owned by one thread and summed in a fixed order.
// Thread mapping is by threadIdx only (kTileThreads = 4 groups of 32), so it is the same
// for waves of 32 and 64.
#pragma once
#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/training_rows.cuh"

namespace msa::MSA_GPU_NS {

inline constexpr int kTileThreads = 128;
inline constexpr int kTileKeys = 32;
inline constexpr int kTileGroups = kTileThreads / kTileKeys;  // 4
inline constexpr int kKStride = kTileKeys + 1;                // floats per dim of Kt / Vt
// CTAs per SM the tiled kernels are built for (__launch_bounds__): as many as the largest
// tile set's shared memory allows on sm_90 (3 x 57 KiB), and up to 170 registers a thread,
// which score_tile's unrolled loads take (at 4 CTAs ptxas caps them at 128 and spills).
inline constexpr int kTileMinBlocks = 3;

// Query rows per tile, for the largest tile set that stays under 64 KiB (AMD's LDS limit;
// CUDA opts in above 48 KiB): DP = 96 takes 57 KiB, DP = 128 (16 rows) 53 KiB. 32 rows
// give score_tile 2 + 2 * 8 shared loads per 4 dims for 64 FMAs.
template <int DP>
constexpr int tile_queries() {
  return DP <= 96 ? 32 : 16;
}

// The tile set, in dynamic shared memory (tiles_smem: sizeof(BwdTiles<DP>) bytes).
template <int DP>
struct BwdTiles {
  static constexpr int BQ = tile_queries<DP>();
  float kt[DP * kKStride];  // K^T: kt[d * kKStride + key]
  float vt[DP * kKStride];
  alignas(16) float q[BQ * DP];
  alignas(16) float dout[BQ * DP];
  alignas(16) float p[BQ * kTileKeys];
  alignas(16) float ds[BQ * kTileKeys];
  float lse[BQ];
  float delta[BQ];
  int lim[BQ];  // keys [0, lim[r]) of the tile are row r's (score_tile<.., true>)
};

// delta[r] = dot(dout[r], out[r]) as one fmaf chain over d in order, the order in which
// score_tile sums dout.v: a row whose only attended key has v equal to its out (P = 1)
// gets dP - delta = 0 exactly, so its dq is exactly 0 as in the reference. One thread per
// row (rows x D elements, a small fraction of the tiles' traffic).
template <int DT, int kThreads>
__global__ void __launch_bounds__(kThreads)
    tile_delta_kernel(const void* dout, const void* out, int64_t rows, int D, float* delta) {
  using T = typename Elem<DT>::T;
  const T* o = static_cast<const T*>(dout);
  const T* y = static_cast<const T*>(out);
  for (int64_t r = int64_t{blockIdx.x} * kThreads + threadIdx.x; r < rows; r += int64_t{gridDim.x} * kThreads) {
    float acc = 0.0f;
    for (int d = 0; d < D; ++d) acc = fmaf(Elem<DT>::load(o[r * D + d]), Elem<DT>::load(y[r * D + d]), acc);
    delta[r] = acc;
  }
}

// Sets a tiled kernel's dynamic shared memory limit and returns its size.
template <auto Kernel, int DP>
int tiles_smem(const Stream& st) {
  constexpr int bytes = static_cast<int>(sizeof(BwdTiles<DP>));
  static_assert(bytes <= 64 * 1024, "the tiles must fit AMD's 64 KiB of LDS");
  allow_smem<Kernel>(bytes, st.props().index);
  return bytes;
}

// Stages key rows 0 .. kTileKeys - 1 of K and V transposed: key_off(r) is row r's element
// offset in k and v, or -1 (zero row).
template <int DT, int DP, class KeyOff>
__device__ __forceinline__ void stage_keys(BwdTiles<DP>& s, const void* k, const void* v, int D, KeyOff key_off) {
  using T = typename Elem<DT>::T;
  for (int i = threadIdx.x; i < kTileKeys * DP; i += kTileThreads) {
    const int r = i / DP, d = i % DP;
    float kv = 0.0f, vv = 0.0f;
    const int64_t off = d < D ? key_off(r) : -1;
    if (off >= 0) {
      kv = Elem<DT>::load(static_cast<const T*>(k)[off + d]);
      vv = Elem<DT>::load(static_cast<const T*>(v)[off + d]);
    }
    s.kt[d * kKStride + r] = kv;
    s.vt[d * kKStride + r] = vv;
  }
}

// Stages query rows 0 .. BQ - 1: row_of(r) is the row id (q / dout at row * D, lse and
// delta at row) or -1 (zero row, lse = -inf: its P is 0).
template <int DT, int DP, class RowOf>
__device__ __forceinline__ void stage_queries(BwdTiles<DP>& s, const void* q, const void* dout, const float* lse,
                                              const float* delta, int D, RowOf row_of) {
  using T = typename Elem<DT>::T;
  constexpr int BQ = BwdTiles<DP>::BQ;
  for (int i = threadIdx.x; i < BQ * DP; i += kTileThreads) {
    const int r = i / DP, d = i % DP;
    float qv = 0.0f, ov = 0.0f;
    const int64_t row = d < D ? row_of(r) : -1;
    if (row >= 0) {
      const int64_t off = row * D + d;
      qv = Elem<DT>::load(static_cast<const T*>(q)[off]);
      ov = Elem<DT>::load(static_cast<const T*>(dout)[off]);
    }
    s.q[i] = qv;
    s.dout[i] = ov;
  }
  for (int r = threadIdx.x; r < BQ; r += kTileThreads) {
    const int64_t row = row_of(r);
    s.lse[r] = row >= 0 ? lse[row] : __uint_as_float(0xff800000u);
    s.delta[r] = row >= 0 ? delta[row] : 0.0f;
  }
}

// P and dS of the staged tiles, keys [0, nk) valid (and [0, lim[r]) for row r when
// kRowLimits): thread (group g, key k) computes rows
// g, g + 4, .. against key k, reading q / dout rows as broadcast float4s and K^T / V^T
// columns as conflict-free scalars (per 4 dims: 4 + 4 + 2 * BQ / 4 loads for BQ * 2 FMAs).
template <int DP, bool kWantP, bool kRowLimits = false>
__device__ __forceinline__ void score_tile(BwdTiles<DP>& s, int nk, float scale) {
  constexpr int BQ = BwdTiles<DP>::BQ, QJ = BQ / kTileGroups;
  const int k = threadIdx.x % kTileKeys, g = threadIdx.x / kTileKeys;
  float sq[QJ] = {}, dp[QJ] = {};
#pragma unroll 2
  for (int d = 0; d < DP; d += 4) {
    float kk[4], vv[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      kk[u] = s.kt[(d + u) * kKStride + k];
      vv[u] = s.vt[(d + u) * kKStride + k];
    }
#pragma unroll
    for (int j = 0; j < QJ; ++j) {
      const float4 q4 = *reinterpret_cast<const float4*>(&s.q[(g + j * kTileGroups) * DP + d]);
      const float4 o4 = *reinterpret_cast<const float4*>(&s.dout[(g + j * kTileGroups) * DP + d]);
      sq[j] = fmaf(q4.x, kk[0], sq[j]);
      sq[j] = fmaf(q4.y, kk[1], sq[j]);
      sq[j] = fmaf(q4.z, kk[2], sq[j]);
      sq[j] = fmaf(q4.w, kk[3], sq[j]);
      // dout.v as tile_delta_kernel sums dout.out: bit-equal when v is the row's out.
      dp[j] = fmaf(o4.x, vv[0], dp[j]);
      dp[j] = fmaf(o4.y, vv[1], dp[j]);
      dp[j] = fmaf(o4.z, vv[2], dp[j]);
      dp[j] = fmaf(o4.w, vv[3], dp[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < QJ; ++j) {
    const int r = g + j * kTileGroups;
    const float l = s.lse[r];
    float pr = 0.0f, ds = 0.0f;
    if (k < nk && (!kRowLimits || k < s.lim[r]) && !is_neg_inf(l)) {
      pr = expf(scale * sq[j] - l);
      ds = scale * pr * (dp[j] - s.delta[r]);
    }
    if (kWantP) s.p[r * kTileKeys + k] = pr;
    s.ds[r * kTileKeys + k] = ds;
  }
}

// Per-key accumulators of dK and dV: thread (group g, lane-dim t) owns keys
// g * 8 .. g * 8 + 7 and dims t, t + 32, .. (DP / 32 of them).
template <int DP>
struct KeyGrads {
  static constexpr int KK = kTileKeys / kTileGroups, DI = DP / 32;
  float dk[KK][DI] = {};
  float dv[KK][DI] = {};

  // dV += P^T dout, dK += dS^T q over the nq staged rows, in row order.
  __device__ __forceinline__ void add(const BwdTiles<DP>& s, int nq) {
    const int t = threadIdx.x % 32, g = threadIdx.x / 32;
    for (int r = 0; r < nq; ++r) {
      float pr[KK], ds[KK], qv[DI], ov[DI];
#pragma unroll
      for (int u = 0; u < KK; u += 4) {
        const float4 p4 = *reinterpret_cast<const float4*>(&s.p[r * kTileKeys + g * KK + u]);
        const float4 d4 = *reinterpret_cast<const float4*>(&s.ds[r * kTileKeys + g * KK + u]);
        pr[u] = p4.x, pr[u + 1] = p4.y, pr[u + 2] = p4.z, pr[u + 3] = p4.w;
        ds[u] = d4.x, ds[u + 1] = d4.y, ds[u + 2] = d4.z, ds[u + 3] = d4.w;
      }
#pragma unroll
      for (int i = 0; i < DI; ++i) {
        qv[i] = s.q[r * DP + t + 32 * i];
        ov[i] = s.dout[r * DP + t + 32 * i];
      }
#pragma unroll
      for (int u = 0; u < KK; ++u)
#pragma unroll
        for (int i = 0; i < DI; ++i) {
          dv[u][i] += pr[u] * ov[i];
          dk[u][i] += ds[u] * qv[i];
        }
    }
  }

  // Writes key row r to dk_out / dv_out at element offset key_off(r) (-1: not written).
  template <class KeyOff>
  __device__ __forceinline__ void store(float* dk_out, float* dv_out, int D, KeyOff key_off) const {
    const int t = threadIdx.x % 32, g = threadIdx.x / 32;
#pragma unroll
    for (int u = 0; u < KK; ++u) {
      const int64_t off = key_off(g * KK + u);
      if (off < 0) continue;
#pragma unroll
      for (int i = 0; i < DI; ++i) {
        const int d = t + 32 * i;
        if (d < D) {
          dk_out[off + d] = dk[u][i];
          dv_out[off + d] = dv[u][i];
        }
      }
    }
  }
};

// Per-query accumulator of dQ: thread (group g, lane-dim t) owns rows g, g + 4, .. and
// dims t, t + 32, ...
template <int DP>
struct QueryGrads {
  static constexpr int QJ = BwdTiles<DP>::BQ / kTileGroups, DI = DP / 32;
  float dq[QJ][DI] = {};

  // dQ += dS K over the staged key tile (keys past nk have dS = 0), in key order.
  __device__ __forceinline__ void add(const BwdTiles<DP>& s) {
    const int t = threadIdx.x % 32, g = threadIdx.x / 32;
#pragma unroll 2
    for (int k = 0; k < kTileKeys; k += 4) {
      float kv[DI][4];
#pragma unroll
      for (int i = 0; i < DI; ++i)
#pragma unroll
        for (int u = 0; u < 4; ++u) kv[i][u] = s.kt[(t + 32 * i) * kKStride + k + u];
#pragma unroll
      for (int j = 0; j < QJ; ++j) {
        const float4 d4 = *reinterpret_cast<const float4*>(&s.ds[(g + j * kTileGroups) * kTileKeys + k]);
#pragma unroll
        for (int i = 0; i < DI; ++i) dq[j][i] += d4.x * kv[i][0] + d4.y * kv[i][1] + d4.z * kv[i][2] + d4.w * kv[i][3];
      }
    }
  }

  // Writes query row r to dq_out at row row_of(r) (-1: not written).
  template <class RowOf>
  __device__ __forceinline__ void store(float* dq_out, int D, RowOf row_of) const {
    const int t = threadIdx.x % 32, g = threadIdx.x / 32;
#pragma unroll
    for (int j = 0; j < QJ; ++j) {
      const int64_t row = row_of(g + j * kTileGroups);
      if (row < 0) continue;
#pragma unroll
      for (int i = 0; i < DI; ++i) {
        const int d = t + 32 * i;
        if (d < D) dq_out[row * D + d] = dq[j][i];
      }
    }
  }
};

// D rounded up to a multiple of 32 (<= kMaxHeadDim = 128) as the constexpr DP.
#define MSA_DISPATCH_TILE_DP(D, DP, ...) \
  if ((D) <= 32) {                       \
    constexpr int DP = 32;               \
    __VA_ARGS__;                         \
  } else if ((D) <= 64) {                \
    constexpr int DP = 64;               \
    __VA_ARGS__;                         \
  } else if ((D) <= 96) {                \
    constexpr int DP = 96;               \
    __VA_ARGS__;                         \
  } else {                               \
    constexpr int DP = 128;              \
    __VA_ARGS__;                         \
  }

}  // namespace msa::MSA_GPU_NS
