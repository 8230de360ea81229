// vendor.h: the ONE place where CUDA and HIP names differ (after ggml's vendors/hip.h).
// Everything in backends/cuda/ is written with CUDA runtime names (cudaStream_t,
// cudaMemcpyAsync, __shfl_xor_sync...). Compiled by nvcc they are themselves; compiled by
// hipcc (the HIP backend builds the portable kernels from this folder) this header maps
// them to HIP. Also defines MSA_GPU_NS (the namespace the code lands in: cuda or hip)
// and MSA_WARP_SIZE (the physical warp/wave width: never hard-code 32 elsewhere).
#pragma once

#if defined(__HIP_PLATFORM_AMD__) || defined(MSA_VENDOR_HIP)
#if __has_include(<hip/hip_bf16.h>)  // ROCm >= 5.7 (Debian 12 HIP 5.2 lacks it; nothing here needs it)
#include <hip/hip_bf16.h>
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#ifndef MSA_GPU_NS
#define MSA_GPU_NS hip
#endif
#define MSA_VENDOR_NAME "hip"

// Runtime API.
#define cudaDeviceProp hipDeviceProp_t
#define cudaError_t hipError_t
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaEventCreate hipEventCreate
#define cudaEventDestroy hipEventDestroy
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventRecord hipEventRecord
#define cudaEvent_t hipEvent_t
#define cudaFree hipFree
#define cudaFreeAsync hipFreeAsync
#define cudaFreeHost hipHostFree
// HIP 5.x has only hipFuncSetAttribute(const void*, ...), not CUDA's template overload.
// AMD needs no opt-in for dynamic LDS (up to the workgroup's 64 KiB on CDNA; a larger
// launch fails), so the CUDA opt-in, which may ask for more, is accepted as a no-op.
template <typename F>
inline hipError_t msa_hip_func_set_attribute(F* func, hipFuncAttribute attr, int value) {
  if (attr == hipFuncAttributeMaxDynamicSharedMemorySize) return value >= 0 ? hipSuccess : hipErrorInvalidValue;
  return hipFuncSetAttribute(reinterpret_cast<const void*>(func), attr, value);
}
#define cudaFuncSetAttribute msa_hip_func_set_attribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaMalloc hipMalloc
#define cudaMallocAsync hipMallocAsync
#define cudaMallocHost hipHostMalloc
#define cudaMemGetInfo hipMemGetInfo
#define cudaMemPoolAttrReleaseThreshold hipMemPoolAttrReleaseThreshold
#define cudaMemPoolSetAttribute hipMemPoolSetAttribute
#define cudaMemPool_t hipMemPool_t
#define cudaDeviceGetDefaultMemPool hipDeviceGetDefaultMemPool
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMemoryPoolsSupported hipDeviceAttributeMemoryPoolsSupported
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemsetAsync hipMemsetAsync
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaSetDevice hipSetDevice
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess

// Warp intrinsics: HIP has no mask argument (ggml: HIP_DISABLE_WARP_SYNC_BUILTINS).
#define __shfl_sync(mask, var, lane, width) __shfl(var, lane, width)
#define __shfl_xor_sync(mask, var, lane_mask, width) __shfl_xor(var, lane_mask, width)
#define __shfl_down_sync(mask, var, delta, width) __shfl_down(var, delta, width)
#define __shfl_up_sync(mask, var, delta, width) __shfl_up(var, delta, width)
#define __ballot_sync(mask, pred) __ballot(pred)
#define __any_sync(mask, pred) __any(pred)
#define __all_sync(mask, pred) __all(pred)
#define __syncwarp(...) ((void)0)

#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define MSA_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define MSA_WARP_SIZE 64
#endif
// Lane masks are 64-bit on AMD.
using msa_lane_mask_t = unsigned long long;
#define MSA_FULL_MASK 0xffffffffffffffffull

#else  // CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#ifndef MSA_GPU_NS
#define MSA_GPU_NS cuda
#endif
#define MSA_VENDOR_NAME "cuda"
#define MSA_WARP_SIZE 32
using msa_lane_mask_t = unsigned int;
#define MSA_FULL_MASK 0xffffffffu
#endif
