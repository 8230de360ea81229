// CUDA-only (sm_80+) inline-PTX helpers for the tensor-core kernels outside the portable tier:
// cp.async 16-byte copies (with zero fill) and 4-byte ones, ldmatrix (plain and
// transposed), movmatrix (a fragment transposed), mma.sync m16n8k16 with f32 accumulation
// for bf16/f16, packing two floats into one bf16x2/f16x2 register, acquire/release flags,
// the hardware exp2, and the non-finite value rule's row marking. Fragment
// layouts follow the PTX ISA ("Matrix fragments for mma.m16n8k16"): lane = 4 g + q holds
// rows g and g + 8, columns 2q, 2q + 1 (+8).
#pragma once
#include <cstdint>

#include "backends/cuda/common.cuh"

namespace msa::cuda::ptx {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared; src_bytes < 16 zero-fills the rest (0: nothing is read).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 4 bytes global -> shared (cp.async.ca: the 16-byte .cg form only takes whole chunks).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
// The 8x8 16-bit matrix of a warp's fragment (lane 4 r + i: row r, columns 2 i, 2 i + 1,
// the lower column in the low half) transposed: the same layout of its transpose.
__device__ __forceinline__ uint32_t movmatrix_t(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(d) : "r"(a));
  return d;
}
// c += a (16x16, row-major fragment) * b (16x8, column fragment b0, b1), f32 accumulate.
template <int DT>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (DT == kBF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
// Two floats rounded to nearest even into one 32-bit register (lo in the low half).
template <int DT>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t r;
  if constexpr (DT == kBF16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    __builtin_memcpy(&r, &h, sizeof(r));
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    __builtin_memcpy(&r, &h, sizeof(r));
  }
  return r;
}
// Device-scope acquire load / release store of a flag in global memory (the ordered
// hand-off of a running sum between thread blocks).
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// 2^x by the SFU (ex2.approx, ~2 ulp; -inf -> +0; results below 2^-126 flush to 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The value rule of docs/spec.md ("Non-finite inputs"): a row whose accumulated output
// holds a non-finite element (an attended value that is NaN or infinite) gets its softmax
// sum l set to NaN, which the kernels' epilogues and split merges write as a NaN row.
// Fragment layouts: o[n][e] (mma.sync m16n8k16) and flat o[i] (wgmma m64nNk16) both hold
// row g for e / i bits 1 = 0 and row g + 8 otherwise; l[h] is this lane's partial sum of
// row g + 8 h. The flag is OR-ed over the lane quad that shares a row: every lane of the
// warp must call it.
__device__ __forceinline__ void nan_rows_of(bool bad0, bool bad1, float (&l)[2]) {
  int b0 = bad0, b1 = bad1;
  b0 |= __shfl_xor_sync(0xffffffffu, b0, 1);
  b0 |= __shfl_xor_sync(0xffffffffu, b0, 2);
  b1 |= __shfl_xor_sync(0xffffffffu, b1, 1);
  b1 |= __shfl_xor_sync(0xffffffffu, b1, 2);
  if (b0) l[0] = quiet_nan();
  if (b1) l[1] = quiet_nan();
}
template <int N>
__device__ __forceinline__ void mark_nonfinite_rows(const float (&o)[N][4], float (&l)[2]) {
  bool bad[2] = {false, false};
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) bad[e >> 1] = bad[e >> 1] || nonfinite(o[n][e]);
  nan_rows_of(bad[0], bad[1], l);
}
template <int N>
__device__ __forceinline__ void mark_nonfinite_rows(const float (&o)[N], float (&l)[2]) {
  bool bad[2] = {false, false};
#pragma unroll
  for (int i = 0; i < N; ++i) bad[(i >> 1) & 1] = bad[(i >> 1) & 1] || nonfinite(o[i]);
  nan_rows_of(bad[0], bad[1], l);
}

}  // namespace msa::cuda::ptx
