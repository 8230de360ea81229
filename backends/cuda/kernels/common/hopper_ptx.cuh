// CUDA-only Hopper (sm_90a) inline-PTX helpers for the Hopper-tier kernels:
// warpgroup MMA (wgmma.mma_async) with shared-memory matrix descriptors, mbarriers with
// transaction counts, bulk asynchronous copies (cp.async.bulk, 1D) and 2D TMA tile loads
// (cp.async.bulk.tensor; e.g. the maps of indexer_score/tensor_map.h).
//
// Layouts follow the PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
// - A tile of R rows x 64 bf16/f16 (128 bytes per row) stored with the 128-byte swizzle:
//   16-byte chunk c of row r lives at chunk c ^ (r % 8) of that row; rows are 128 bytes
//   apart; the tile starts 1024-byte aligned. Its K-major descriptor has SBO = 1024 bytes
//   (8 rows, one swizzle atom) and LBO unused; the next k16 slice starts 32 bytes further.
// - Accumulator of m64nNk16 (f32): warp w of the warpgroup holds rows 16 w .. 16 w + 15;
//   lane 4 g + q holds, for each n8 column group j, d[4j + 0..1] = row g, columns 8 j + 2 q
//   (+1) and d[4j + 2..3] = row g + 8, same columns (the mma.sync m16n8 C fragment, N/8
//   times).
// Everything here exists only on sm_90a; callers guard with MSA_HOPPER_PTX.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/common/mma_ptx.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MSA_HOPPER_PTX 1
#else
#define MSA_HOPPER_PTX 0
#endif

namespace msa::cuda::hopper {

// ---- shared-memory matrix descriptors -------------------------------------------------

enum class Swizzle : uint64_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };

// A wgmma shared-memory descriptor (PTX "Matrix Descriptor Format"): start address,
// leading and stride byte offsets (all >> 4, 14 bits each), swizzle mode in bits 62-63.
__device__ __forceinline__ uint64_t smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                              Swizzle swizzle) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  d |= static_cast<uint64_t>(swizzle) << 62;
  return d;
}
// K-major operand in 128-byte swizzled rows of 64 elements (see the top of this file).
__device__ __forceinline__ uint64_t desc_kmajor_sw128(uint32_t smem_addr) {
  return smem_desc(smem_addr, 16, 1024, Swizzle::b128);
}
// Byte offset of element (row, col) of a 128-byte swizzled tile of 64 two-byte elements per
// row; the tile base must be 1024-byte aligned.
__host__ __device__ __forceinline__ uint32_t sw128_offset(uint32_t row, uint32_t col) {
  const uint32_t chunk = (col >> 3) ^ (row & 7);
  return row * 128 + chunk * 16 + (col & 7) * 2;
}

// ---- wgmma ------------------------------------------------------------------------------

__device__ __forceinline__ void wgmma_fence() {
#if MSA_HOPPER_PTX
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if MSA_HOPPER_PTX
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if MSA_HOPPER_PTX
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Makes generic-proxy writes to shared memory (st.shared, cp.async) visible to the async
// proxy that wgmma and the bulk copies read through.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Keeps the compiler from moving accumulator reads/writes across an async MMA.
template <int N>
__device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define MSA_WG_R8(i)                                                                                          \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define MSA_WG_R32(i) MSA_WG_R8(i), MSA_WG_R8(i + 8), MSA_WG_R8(i + 16), MSA_WG_R8(i + 24)
#define MSA_WG_A32                                                                                          \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31}"
#define MSA_WG_A64                                                                                          \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27," \
  "%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,"    \
  "%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"

// d (64 x N, f32) = A (64 x 16, shared, K-major) * B (16 x N, shared, K-major) + (accumulate
// ? d : 0). DT: kBF16 or kF16 (both operands). N: 64 or 128.
template <int DT, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) {
#if MSA_HOPPER_PTX
  const int scale_d = accumulate ? 1 : 0;
  if constexpr (N == 64 && DT == kBF16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " MSA_WG_A32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : MSA_WG_R32(0)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " MSA_WG_A32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
        : MSA_WG_R32(0)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else if constexpr (N == 128 && DT == kBF16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MSA_WG_A64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : MSA_WG_R32(0), MSA_WG_R32(32)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  } else {
    static_assert(N == 128, "wgmma_ss: N must be 64 or 128");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MSA_WG_A64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
        : MSA_WG_R32(0), MSA_WG_R32(32)
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
  }
#else
  __trap();
#endif
}

// d (64 x N) = A (64 x 16, registers: the mma.sync m16n8k16 A fragment of this warp's 16
// rows, 4 x 32 bits) * B (16 x N, shared) + (accumulate ? d : 0). TransB = 0: B K-major
// (stored N x 16); 1: B MN-major (stored 16 x N, e.g. V as [key][dim]).
template <int DT, int N, int TransB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {
#if MSA_HOPPER_PTX
  const int scale_d = accumulate ? 1 : 0;
  if constexpr (N == 64 && DT == kBF16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " MSA_WG_A32
        ", {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
        : MSA_WG_R32(0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB));
  } else if constexpr (N == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " MSA_WG_A32 ", {%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
        : MSA_WG_R32(0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB));
  } else if constexpr (N == 128 && DT == kBF16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MSA_WG_A64
        ", {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"
        : MSA_WG_R32(0), MSA_WG_R32(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB));
  } else {
    static_assert(N == 128, "wgmma_rs: N must be 64 or 128");
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " MSA_WG_A64 ", {%64,%65,%66,%67}, %68, p, 1, 1, %70;\n}\n"
        : MSA_WG_R32(0), MSA_WG_R32(32)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB));
  }
#else
  __trap();
#endif
}

#undef MSA_WG_R8
#undef MSA_WG_R32
#undef MSA_WG_A32
#undef MSA_WG_A64

// ---- mbarriers and bulk copies ------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes mbarrier.init visible to the async proxy (bulk copies complete on the barrier).
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also announces `bytes` of transactions still to land on the barrier.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase with parity `phase` (0 or 1) has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t phase) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(phase)
      : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) global -> shared by the copy
// engine; completion is counted on `bar` as transaction bytes.
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// 2D TMA tile load (box and swizzle from the tensor map) completing on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

}  // namespace msa::cuda::hopper
