// A CPU emulation of the GPU execution model the portable kernels are written for, so
// that they (and the helpers of backends/cuda/common.cuh) run on the host at wavefront
// 64 as on AMD CDNA, or 32 as on NVIDIA: every GPU thread of a block is a fiber; a
// wave of `warp` consecutive threads exchanges values through shuffles and ballots with
// HIP's semantics (64-bit lane masks, the `width` segments of __shfl_xor/up/down);
// __syncthreads is a block barrier. Fibers switch only at these collectives, so shared
// memory behaves as on a GPU whose lanes run in lockstep between them.
//
// Strictness, so that a kernel relying on something a GPU does not promise fails here:
// - every lane of a wave that has not exited must reach the same collective (same kind,
//   width and offset); a lane that exited while others wait, or lanes split between
//   __syncthreads and a shuffle, stop the launch with an error (a deadlock or undefined
//   behaviour on hardware);
// - reading a lane that does not exist (block size not a multiple of the wave) or has
//   exited gives a poison value (NaN for floats, 0x7fa5a5a5 for ints);
// - dynamic shared memory starts filled with 0xff bytes (NaN), blocks run one at a time.
// Launch errors are thrown as msa_emu::EmuError from the launch.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- CUDA/HIP vector and index types --------------------------------------------------
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

namespace msa_emu {

using Mask = unsigned long long;

// An error of the emulated launch (deadlock, divergent collective, bad configuration).
struct EmuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The launch configuration of `kernel<<<grid, block, smem, stream>>>`.
struct LaunchCfg {
  dim3 grid, block;
  size_t smem = 0;
  LaunchCfg(dim3 g, dim3 b, size_t s = 0, const void* /*stream*/ = nullptr) : grid(g), block(b), smem(s) {}
};

// Runs `body` once per GPU thread of every block of `cfg`, with waves of `warp` lanes.
// Throws EmuError on a launch error or a collective that cannot complete.
void run_grid(int warp, const LaunchCfg& cfg, const std::function<void()>& body);

// What `kernel<<<cfg>>>(args...)` becomes (tests/hip/emu/cu_to_cpp.cpp): the arguments
// are evaluated once on the host and every thread calls the kernel with copies.
template <typename F, typename... A>
void launch(int warp, const LaunchCfg& cfg, F&& kernel, A&&... args) {
  auto saved = std::make_tuple(std::decay_t<A>(std::forward<A>(args))...);
  run_grid(warp, cfg, [&] { std::apply(kernel, saved); });
}

// ---- per-thread state of the running fiber ----------------------------------------------
const uint3& thread_idx();
const uint3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
int warp_width();  // the physical wave size of the running launch
int lane_id();     // lane within the wave
void* dyn_smem_base();
template <typename T>
T* dyn_smem() {
  return static_cast<T*>(dyn_smem_base());
}

// ---- collectives ---------------------------------------------------------------------
// Other fibers run inside these calls and may change any memory, __shared__ arrays (here
// function-local statics) included. An out-of-line call alone does not tell the
// compiler that: it may keep a static whose address never escapes in a register across
// it. The memory clobbers around each collective make it a full compiler barrier, as
// __syncthreads and shuffles are on a GPU.
#define MSA_EMU_COMPILER_BARRIER() asm volatile("" ::: "memory")
void sync_block_impl();
const uint64_t* exchange_impl(uint64_t mine, uint64_t tag, Mask* live);

// __syncthreads.
inline void sync_block() {
  MSA_EMU_COMPILER_BARRIER();
  sync_block_impl();
  MSA_EMU_COMPILER_BARRIER();
}
// Every live lane of the wave contributes `mine`; returns the wave's contributions
// (indexed by lane) once all have, and the mask of lanes that contributed. `tag`
// identifies the collective: all lanes must pass the same one.
inline const uint64_t* exchange(uint64_t mine, uint64_t tag, Mask* live) {
  MSA_EMU_COMPILER_BARRIER();
  const uint64_t* r = exchange_impl(mine, tag, live);
  MSA_EMU_COMPILER_BARRIER();
  return r;
}
[[noreturn]] void trap(const char* what);

enum ShflMode : uint64_t { kIdx = 1, kXor = 2, kUp = 3, kDown = 4, kBallot = 5, kSyncWarp = 6 };

template <typename T>
T poison() {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  const uint64_t p = sizeof(T) == 8   ? 0x7ff5a5a5a5a5a5a5ull
                     : sizeof(T) == 4 ? 0x7fa5a5a5ull
                     : sizeof(T) == 2 ? 0x7e5aull
                                      : 0xa5ull;
  T r;
  std::memcpy(&r, &p, sizeof(T));
  return r;
}

// Source lane of a shuffle, HIP's rules (the same as CUDA's for valid arguments): the
// wave is split into segments of `width`; xor/up/down leaving the segment read the
// caller's own value.
inline int shfl_source(int mode, int self, int arg, int width) {
  const int seg = self & ~(width - 1);
  switch (mode) {
    case kIdx:
      return seg + (arg & (width - 1));
    case kXor: {
      const int i = self ^ arg;
      return i >= seg + width ? self : i;
    }
    case kUp: {
      const int i = self - arg;
      return i < seg ? self : i;
    }
    default: {  // kDown
      return (self & (width - 1)) + arg >= width ? self : self + arg;
    }
  }
}

void check_width(int width);

template <typename T>
T shfl(int mode, T v, int arg, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  check_width(width);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  // Shuffles by index may differ per lane; the others must agree on offset and width.
  const uint64_t tag = (uint64_t(unsigned(mode)) << 56) | (uint64_t{sizeof(T)} << 48) |
                       (uint64_t(unsigned(width)) << 32) | (mode == kIdx ? 0u : uint32_t(arg));
  Mask live = 0;
  const uint64_t* all = exchange(bits, tag, &live);
  const int src = shfl_source(mode, lane_id(), arg, width);
  if (src < 0 || src >= warp_width() || !((live >> src) & 1ull)) return poison<T>();
  T r;
  std::memcpy(&r, &all[src], sizeof(T));
  return r;
}

// __ballot: bit i set when lane i passes a non-zero predicate (64 bits, as on HIP).
inline Mask ballot(int pred) {
  Mask live = 0;
  const uint64_t* all = exchange(pred != 0 ? 1 : 0, uint64_t{kBallot} << 56, &live);
  Mask m = 0;
  for (int i = 0; i < warp_width(); ++i)
    if (((live >> i) & 1ull) && all[i] != 0) m |= 1ull << i;
  return m;
}
inline Mask live_lanes() {
  Mask live = 0;
  exchange(0, uint64_t{kBallot} << 56, &live);
  return live;
}
// __syncwarp: a wave barrier (lanes of a wave run in lockstep between collectives on AMD;
// CUDA code must say where it relies on that).
inline void sync_warp() {
  Mask live = 0;
  exchange(0, uint64_t{kSyncWarp} << 56, &live);
}

// ---- atomics (fibers switch only at collectives: plain read-modify-write is atomic) ----
template <typename T, typename U>
T atomic_add(T* p, U v) {
  T o = *p;
  *p = static_cast<T>(o + v);
  return o;
}

}  // namespace msa_emu

// ---- math and bit helpers of CUDA/HIP device code ---------------------------------------
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) { return static_cast<int>(__float_as_uint(f)); }
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned>(i)); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return static_cast<unsigned>((uint64_t{a} * b) >> 32); }
template <typename T>
inline T __ldg(const T* p) {
  return *p;
}
inline void __threadfence() {}
inline void __threadfence_block() {}
inline long long clock64() { return 0; }

// CUDA's min/max overloads for mixed integer/float arguments.
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b) : static_cast<C>(a);
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}

template <typename T, typename U>
T atomicAdd(T* p, U v) {
  return msa_emu::atomic_add(p, v);
}
template <typename T, typename U>
T atomicSub(T* p, U v) {
  T o = *p;
  *p = static_cast<T>(o - v);
  return o;
}
template <typename T, typename U>
T atomicOr(T* p, U v) {
  T o = *p;
  *p = static_cast<T>(o | v);
  return o;
}
template <typename T, typename U>
T atomicAnd(T* p, U v) {
  T o = *p;
  *p = static_cast<T>(o & v);
  return o;
}
template <typename T, typename U>
T atomicMax(T* p, U v) {
  T o = *p;
  if (static_cast<T>(v) > o) *p = static_cast<T>(v);
  return o;
}
template <typename T, typename U>
T atomicMin(T* p, U v) {
  T o = *p;
  if (static_cast<T>(v) < o) *p = static_cast<T>(v);
  return o;
}
template <typename T, typename U>
T atomicExch(T* p, U v) {
  T o = *p;
  *p = static_cast<T>(v);
  return o;
}
template <typename T, typename U, typename V>
T atomicCAS(T* p, U compare, V v) {
  T o = *p;
  if (o == static_cast<T>(compare)) *p = static_cast<T>(v);
  return o;
}

// ---- f16 (bit-exact conversions through msa's own, which round to nearest even) --------
struct __half {
  uint16_t x;
};
namespace msa_emu {
float f16_to_f32(uint16_t);
uint16_t f32_to_f16(float);
}  // namespace msa_emu
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline float __half2float(__half h) { return msa_emu::f16_to_f32(h.x); }
inline __half __float2half_rn(float f) { return __half{msa_emu::f32_to_f16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }

// ---- the CUDA runtime, on host memory ---------------------------------------------------
namespace msa_emu {

enum Error : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kMemoryAllocation = 2,
  kInvalidConfiguration = 9,
  kNoDevice = 100,
  kLaunchFailure = 719,
};
enum MemcpyKind : int { kH2D = 1, kD2H = 2, kD2D = 3 };
struct StreamObj {
  int id = 0;
};
struct EventObj {
  double t = 0;
};
using Stream = StreamObj*;
using Event = EventObj*;
enum FuncAttr : int { kMaxDynamicSmem = 8 };

const char* rt_error_string(Error e);
Error rt_get_last_error();
Error rt_set_device(int);
Error rt_get_device(int*);
Error rt_malloc(void** p, size_t n);
Error rt_free(void* p);
Error rt_malloc_async(void** p, size_t n, Stream);
Error rt_free_async(void* p, Stream);
Error rt_malloc_host(void** p, size_t n);
Error rt_free_host(void* p);
Error rt_memcpy_async(void* dst, const void* src, size_t n, MemcpyKind, Stream);
Error rt_memset_async(void* dst, int value, size_t n, Stream);
Error rt_stream_create(Stream* s, unsigned flags);
Error rt_stream_destroy(Stream s);
Error rt_stream_synchronize(Stream s);
Error rt_event_create(Event* e);
Error rt_event_destroy(Event e);
Error rt_event_record(Event e, Stream s);
Error rt_event_elapsed(float* ms, Event a, Event b);
Error rt_mem_get_info(size_t* free_b, size_t* total_b);
// Largest dynamic shared memory a launch may use: 64 KiB, the LDS of an AMD CDNA
// workgroup (static __shared__ sizes are not known here and are not counted).
size_t max_dyn_smem();
// cudaFuncSetAttribute: as vendor.h maps it for HIP, where dynamic LDS needs no opt-in;
// a launch asking for more than max_dyn_smem() fails instead.
template <typename F>
Error rt_func_set_attribute(F*, FuncAttr attr, int value) {
  return attr == kMaxDynamicSmem && value >= 0 ? kSuccess : kInvalidValue;
}

}  // namespace msa_emu
