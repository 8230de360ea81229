// The CPU emulation's stand-in for backends/cuda/vendor.h (found first on the include
// path of the emulated builds in tests/hip). It defines what the real header defines
// (MSA_GPU_NS, MSA_VENDOR_NAME, MSA_WARP_SIZE, msa_lane_mask_t, MSA_FULL_MASK) and maps
// the CUDA names the shared sources use to tests/hip/emu/warp_emu.h. The wave size is
// MSA_EMU_WARP (32 or 64), set per build; masks are 64-bit at 64 as on HIP.
#pragma once
#include "tests/hip/emu/warp_emu.h"

#ifndef MSA_EMU_WARP
#error "MSA_EMU_WARP (32 or 64) must be defined for an emulated build"
#endif
#ifndef MSA_GPU_NS
#error "MSA_GPU_NS must be defined for an emulated build (e.g. emu64)"
#endif
#define MSA_VENDOR_NAME "emu"
#define MSA_WARP_SIZE MSA_EMU_WARP
#if MSA_EMU_WARP == 64
using msa_lane_mask_t = unsigned long long;
#define MSA_FULL_MASK 0xffffffffffffffffull
#else
using msa_lane_mask_t = unsigned int;
#define MSA_FULL_MASK 0xffffffffu
#endif

// Kernel qualifiers.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__
#define __align__(n) alignas(n)

// Indices and wave builtins.
#define threadIdx (::msa_emu::thread_idx())
#define blockIdx (::msa_emu::block_idx())
#define blockDim (::msa_emu::block_dim())
#define gridDim (::msa_emu::grid_dim())
#define warpSize (::msa_emu::warp_width())
#define __syncthreads() ::msa_emu::sync_block()
#define __syncwarp(...) ::msa_emu::sync_warp()
#define __trap() ::msa_emu::trap("__trap()")
#define __shfl_sync(mask, var, lane, ...) ::msa_emu::shfl(::msa_emu::kIdx, var, lane, ::msa_emu_width(__VA_ARGS__))
#define __shfl_xor_sync(mask, var, m, ...) ::msa_emu::shfl(::msa_emu::kXor, var, m, ::msa_emu_width(__VA_ARGS__))
#define __shfl_up_sync(mask, var, d, ...) ::msa_emu::shfl(::msa_emu::kUp, var, d, ::msa_emu_width(__VA_ARGS__))
#define __shfl_down_sync(mask, var, d, ...) ::msa_emu::shfl(::msa_emu::kDown, var, d, ::msa_emu_width(__VA_ARGS__))
#define __ballot_sync(mask, pred) (static_cast<msa_lane_mask_t>(::msa_emu::ballot(pred)))
#define __any_sync(mask, pred) (::msa_emu::ballot(pred) != 0)
#define __all_sync(mask, pred) (::msa_emu::ballot(pred) == ::msa_emu::live_lanes())
#define __activemask() (static_cast<msa_lane_mask_t>(::msa_emu::live_lanes()))

// Default shuffle width: the whole wave.
inline int msa_emu_width() { return MSA_EMU_WARP; }
inline int msa_emu_width(int w) { return w; }

// Runtime API.
#define cudaError_t ::msa_emu::Error
#define cudaSuccess ::msa_emu::kSuccess
#define cudaErrorMemoryAllocation ::msa_emu::kMemoryAllocation
#define cudaErrorInvalidValue ::msa_emu::kInvalidValue
#define cudaErrorNoDevice ::msa_emu::kNoDevice
#define cudaStream_t ::msa_emu::Stream
#define cudaEvent_t ::msa_emu::Event
#define cudaMemcpyHostToDevice ::msa_emu::kH2D
#define cudaMemcpyDeviceToHost ::msa_emu::kD2H
#define cudaMemcpyDeviceToDevice ::msa_emu::kD2D
#define cudaStreamNonBlocking 1u
#define cudaFuncAttributeMaxDynamicSharedMemorySize ::msa_emu::kMaxDynamicSmem
#define cudaGetErrorString ::msa_emu::rt_error_string
#define cudaGetLastError ::msa_emu::rt_get_last_error
#define cudaSetDevice ::msa_emu::rt_set_device
#define cudaGetDevice ::msa_emu::rt_get_device
#define cudaMalloc ::msa_emu::rt_malloc
#define cudaFree ::msa_emu::rt_free
#define cudaMallocAsync ::msa_emu::rt_malloc_async
#define cudaFreeAsync ::msa_emu::rt_free_async
#define cudaMallocHost ::msa_emu::rt_malloc_host
#define cudaFreeHost ::msa_emu::rt_free_host
#define cudaMemcpyAsync ::msa_emu::rt_memcpy_async
#define cudaMemsetAsync ::msa_emu::rt_memset_async
#define cudaStreamCreateWithFlags ::msa_emu::rt_stream_create
#define cudaStreamDestroy ::msa_emu::rt_stream_destroy
#define cudaStreamSynchronize ::msa_emu::rt_stream_synchronize
#define cudaEventCreate ::msa_emu::rt_event_create
#define cudaEventDestroy ::msa_emu::rt_event_destroy
#define cudaEventRecord ::msa_emu::rt_event_record
#define cudaEventElapsedTime ::msa_emu::rt_event_elapsed
#define cudaMemGetInfo ::msa_emu::rt_mem_get_info
#define cudaFuncSetAttribute ::msa_emu::rt_func_set_attribute
