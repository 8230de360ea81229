// Register-blocked products S = A B^T of two row-major f32 tiles in shared memory (the
// indexer_kl kernels): A holds kRowsT rows, B kKeysT rows (keys), DP dims each, padded to
// DP + 4 floats. Each of the kTileThreads threads owns a 4 x 4 block of S (rows
// rg + 8 i, keys kg + 16 u) and reads A and B as float4s: per 4 dims 8 shared loads for
// 64 FMAs, where score_tile's one key per thread takes 2 + 2 * BQ / 4 loads for 2 * BQ
// FMAs. With the strides above the 8 rows and 8 keys a group of 32 threads reads at once
// fall in distinct banks. Every element of S is one fmaf chain over d in ascending order
// (zero padding adds exact zeros), so results do not depend on the thread mapping.
#pragma once
#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/kernels/portable/backward_tiles.cuh"

namespace msa::MSA_GPU_NS {

inline constexpr int kRowsT = 32;  // rows of A
inline constexpr int kKeysT = 64;  // rows of B
static_assert(kTileThreads == 128 && kRowsT * kKeysT == 16 * kTileThreads, "4 x 4 per thread");

template <int DP>
constexpr int tile_stride() {
  return DP + 4;
}

// This thread's first row and key of S: rows rg + 8 i and keys kg + 16 u, i, u < 4.
struct ProductThread {
  int rg, kg;
};
__device__ __forceinline__ ProductThread product_thread() {
  const int lane = threadIdx.x % 32, group = threadIdx.x / 32;
  return {(group % 2) * 4 + lane / 8, (group / 2) * 8 + lane % 8};
}

// s[i][u] = dot(a row rg + 8 i, b row kg + 16 u) over DP dims.
template <int DP>
__device__ __forceinline__ void product_block(const float* a, const float* b, float (&s)[4][4]) {
  constexpr int S = tile_stride<DP>();
  const ProductThread th = product_thread();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int u = 0; u < 4; ++u) s[i][u] = 0.0f;
#pragma unroll 2
  for (int d = 0; d < DP; d += 4) {
    float4 av[4], bv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) av[i] = *reinterpret_cast<const float4*>(a + (th.rg + 8 * i) * S + d);
#pragma unroll
    for (int u = 0; u < 4; ++u) bv[u] = *reinterpret_cast<const float4*>(b + (th.kg + 16 * u) * S + d);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        s[i][u] = fmaf(av[i].x, bv[u].x, s[i][u]);
        s[i][u] = fmaf(av[i].y, bv[u].y, s[i][u]);
        s[i][u] = fmaf(av[i].z, bv[u].z, s[i][u]);
        s[i][u] = fmaf(av[i].w, bv[u].w, s[i][u]);
      }
  }
}

// Elements [i, i + 4) of `src` (element type DT) as floats: one 8- or 16-byte load where
// they are that aligned (rows of D % 4 == 0 elements in an aligned tensor), else four.
template <int DT>
__device__ __forceinline__ void load4(const void* src, int64_t i, float (&v)[4]) {
  using T = typename Elem<DT>::T;
  const T* p = static_cast<const T*>(src) + i;
  if (reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0) {
    if constexpr (sizeof(T) == 4) {
      const float4 x = *reinterpret_cast<const float4*>(p);
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
      const uint2 x = *reinterpret_cast<const uint2*>(p);
      v[0] = Elem<DT>::load(static_cast<T>(x.x & 0xffffu)), v[1] = Elem<DT>::load(static_cast<T>(x.x >> 16));
      v[2] = Elem<DT>::load(static_cast<T>(x.y & 0xffffu)), v[3] = Elem<DT>::load(static_cast<T>(x.y >> 16));
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) v[e] = Elem<DT>::load(p[e]);
}

// dst row r (r < kRows, tile_stride<DP>() floats a row) = the D elements of `src` at
// offset row_off(r), zero past D; row_off(r) < 0 gives a zero row. The element type is DT
// (kAnyDtype: the runtime dtype dt, f32 / f16 / bf16). Call with every thread of the
// block.
inline constexpr int kAnyDtype = -1;
template <int DT, int DP, int kRows, class RowOff>
__device__ __forceinline__ void stage_rows(float* dst, const void* src, int dt, int D, RowOff row_off) {
  constexpr int S = tile_stride<DP>(), Q = DP / 4;
  for (int i = threadIdx.x; i < kRows * Q; i += kTileThreads) {
    const int r = i / Q, d = (i % Q) * 4;
    const int64_t off = d < D ? row_off(r) : -1;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (off >= 0 && d + 4 <= D) {
      if constexpr (DT == kAnyDtype) {
        if (dt == kF32)
          load4<kF32>(src, off + d, v);
        else if (dt == kF16)
          load4<kF16>(src, off + d, v);
        else
          load4<kBF16>(src, off + d, v);
      } else {
        load4<DT>(src, off + d, v);
      }
    } else if (off >= 0) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (d + e < D) v[e] = load_any(src, DT == kAnyDtype ? dt : DT, off + d + e);
    }
    *reinterpret_cast<float4*>(dst + r * S + d) = make_float4(v[0], v[1], v[2], v[3]);
  }
}

}  // namespace msa::MSA_GPU_NS
