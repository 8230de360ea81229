// msa-slab-probe: how fast can any kernel read the bytes a decode sparse_block_attention
// call must read? B = 8 at the reference shapes selects 16 blocks per (token, KV head):
// 32 groups x 16 blocks x (K + V) = 1024 slabs of 32 KiB (32 MiB), scattered over a large
// cache. This probe reads exactly that pattern with loaders that do no arithmetic, so the
// attention kernel's time can be set against the best a loader achieves on the same bytes,
// next to the large-copy ceiling (cudaMemcpy device to device) measured in the same run.
//
// Loaders: "ldg" (plain 16-byte loads into registers, E slabs per CTA all requested
// before any is used), "cpasync" (cp.async into shared memory, E slabs per CTA in flight),
// "bulk" (sm_90: one cp.async.bulk per slab into shared memory, completion on an mbarrier).
// Timings: "cold" = one launch after a 512 MiB fill (L2 holds none of the slabs), event-
// bracketed, so it includes the launch latency; "queued" = 64 launches back to back, each
// on another of 8 slab sets (the 256 MiB of sets do not fit the 50 MB L2), per launch.
// Usage: msa-slab-probe [--pool-gib N] [--slabs N] [--only SUBSTRING-OF-LOADER-NAME]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kSlab = 32 * 1024;
constexpr int kSets = 8;

#define PROBE_CHECK(x)                                                                         \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// E slabs per CTA, 256 threads: thread t loads 16 bytes at t*16 + 4 KiB * j of each slab.
template <int E>
__global__ void __launch_bounds__(256) ldg_kernel(const char* pool, const int64_t* off, int n, uint4* sink) {
  const int first = blockIdx.x * E;
  uint4 v[E][8];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int s = min(first + e, n - 1);
    const uint4* p = reinterpret_cast<const uint4*>(pool + off[s]) + threadIdx.x;
#pragma unroll
    for (int j = 0; j < 8; ++j) v[e][j] = __ldg(p + j * 256);
  }
  uint32_t x = 0;
#pragma unroll
  for (int e = 0; e < E; ++e)
#pragma unroll
    for (int j = 0; j < 8; ++j) x ^= v[e][j].x ^ v[e][j].y ^ v[e][j].z ^ v[e][j].w;
  if (x == 0x9e3779b9u) sink[0] = make_uint4(x, 0, 0, 0);  // keeps the loads alive
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// E slabs per CTA into E x 32 KiB of shared memory with cp.async (16 bytes per thread and
// instruction), all requested before the one wait.
template <int E>
__global__ void __launch_bounds__(256) cpasync_kernel(const char* pool, const int64_t* off, int n, uint4* sink) {
  extern __shared__ __align__(128) uint4 buf[];
  const int first = blockIdx.x * E;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int s = min(first + e, n - 1);
    const char* src = pool + off[s] + threadIdx.x * 16;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t dst = smem_addr(buf + e * 2048 + j * 256 + threadIdx.x);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src + j * 4096) : "memory");
    }
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  const uint4 v = buf[threadIdx.x * 7 % (E * 2048)];
  if ((v.x ^ v.w) == 0x9e3779b9u) sink[0] = v;
}

// E slabs per CTA, one bulk copy each (thread 0 issues), one mbarrier for all of them.
template <int E>
__global__ void __launch_bounds__(32) bulk_kernel(const char* pool, const int64_t* off, int n, uint4* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint4 buf[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t b = smem_addr(&bar);
  const int first = blockIdx.x * E;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(E * kSlab) : "memory");
    for (int e = 0; e < E; ++e) {
      const int s = min(first + e, n - 1);
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                       smem_addr(buf + e * 2048)),
                   "l"(pool + off[s]), "r"(kSlab), "r"(b)
                   : "memory");
    }
  }
  __syncwarp();
  asm volatile(
      "{\n.reg .pred done;\nW_%=:\nmbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n@!done bra W_%=;\n}\n" ::
          "r"(b)
      : "memory");
  const uint4 v = buf[threadIdx.x * 7 % (E * 2048)];
  if ((v.x ^ v.w) == 0x9e3779b9u) sink[0] = v;
#endif
}

using Kernel = void (*)(const char*, const int64_t*, int, uint4*);

struct Loader {
  std::string name;
  Kernel k;
  int E, threads, smem;
};

struct Timing {
  float cold_us = 0, queued_us = 0;
};

Timing time_loader(const Loader& l, const char* pool, const int64_t* offs, int n, uint4* sink, void* flush,
                   size_t flush_bytes) {
  if (l.smem > 48 * 1024) PROBE_CHECK(cudaFuncSetAttribute(l.k, cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem));
  const int grid = (n + l.E - 1) / l.E;
  cudaEvent_t e0, e1;
  PROBE_CHECK(cudaEventCreate(&e0));
  PROBE_CHECK(cudaEventCreate(&e1));
  l.k<<<grid, l.threads, l.smem>>>(pool, offs, n, sink);  // warm-up (module load)
  PROBE_CHECK(cudaGetLastError());
  std::vector<float> cold;
  for (int r = 0; r < 7; ++r) {
    PROBE_CHECK(cudaMemsetAsync(flush, r, flush_bytes));
    PROBE_CHECK(cudaEventRecord(e0));
    l.k<<<grid, l.threads, l.smem>>>(pool, offs + (r % kSets) * n, n, sink);
    PROBE_CHECK(cudaEventRecord(e1));
    PROBE_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    cold.push_back(ms * 1e3f);
  }
  std::vector<float> queued;
  for (int r = 0; r < 5; ++r) {
    PROBE_CHECK(cudaMemsetAsync(flush, r, flush_bytes));  // keeps the GPU busy while the host queues
    PROBE_CHECK(cudaEventRecord(e0));
    for (int i = 0; i < 64; ++i) l.k<<<grid, l.threads, l.smem>>>(pool, offs + (i % kSets) * n, n, sink);
    PROBE_CHECK(cudaEventRecord(e1));
    PROBE_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    PROBE_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    queued.push_back(ms * 1e3f / 64);
  }
  std::sort(cold.begin(), cold.end());
  std::sort(queued.begin(), queued.end());
  PROBE_CHECK(cudaEventDestroy(e0));
  PROBE_CHECK(cudaEventDestroy(e1));
  return {cold[cold.size() / 2], queued[queued.size() / 2]};
}

double copy_ceiling_gbs(void* a, void* b, size_t bytes) {
  cudaEvent_t e0, e1;
  PROBE_CHECK(cudaEventCreate(&e0));
  PROBE_CHECK(cudaEventCreate(&e1));
  PROBE_CHECK(cudaMemcpyAsync(a, b, bytes, cudaMemcpyDeviceToDevice));
  PROBE_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < 10; ++i) PROBE_CHECK(cudaMemcpyAsync(a, b, bytes, cudaMemcpyDeviceToDevice));
  PROBE_CHECK(cudaEventRecord(e1));
  PROBE_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  PROBE_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  PROBE_CHECK(cudaEventDestroy(e0));
  PROBE_CHECK(cudaEventDestroy(e1));
  return 2.0 * bytes * 10 / (ms / 1e3) / 1e9;  // read + write
}

}  // namespace

int main(int argc, char** argv) {
  double pool_gib = 16;
  int n = 1024;
  std::string only;
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: msa-slab-probe [--pool-gib N] [--slabs N] [--only NAME]\n");
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--pool-gib"))
      pool_gib = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--slabs"))
      n = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--only"))
      only = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: msa-slab-probe [--pool-gib N] [--slabs N] [--only NAME]\n");
      return 2;
    }
  }
  if (pool_gib < 0.5 || n < 1 || n > (1 << 20)) {
    std::fprintf(stderr, "msa-slab-probe: --pool-gib must be >= 0.5 and --slabs in 1..1048576\n");
    return 2;
  }
  const size_t pool_bytes = static_cast<size_t>(pool_gib * (1ull << 30)) / kSlab * kSlab;
  const size_t nslab_pool = pool_bytes / kSlab;
  if (nslab_pool < static_cast<size_t>(n) * kSets) {
    std::fprintf(stderr, "msa-slab-probe: the pool holds %zu slabs, fewer than %d sets of %d\n", nslab_pool, kSets, n);
    return 2;
  }
  char* pool = nullptr;
  PROBE_CHECK(cudaMalloc(&pool, pool_bytes));
  PROBE_CHECK(cudaMemset(pool, 1, pool_bytes));  // touch every page once
  const size_t flush_bytes = 512ull << 20, copy_bytes = 1ull << 30;
  void *flush = nullptr, *ca = nullptr, *cb = nullptr;
  PROBE_CHECK(cudaMalloc(&flush, flush_bytes));
  PROBE_CHECK(cudaMalloc(&ca, copy_bytes));
  PROBE_CHECK(cudaMalloc(&cb, copy_bytes));
  uint4* sink = nullptr;
  PROBE_CHECK(cudaMalloc(&sink, 64));

  // Offsets: "scattered" = distinct random slabs of the whole pool per set; "contiguous" =
  // set s is the slabs [s n, (s + 1) n) back to back.
  std::mt19937_64 rng(12345);
  std::vector<int64_t> scat(static_cast<size_t>(n) * kSets), cont(scat.size());
  std::vector<int64_t> all(nslab_pool);
  for (size_t i = 0; i < nslab_pool; ++i) all[i] = static_cast<int64_t>(i);
  for (size_t i = 0; i < scat.size(); ++i) {
    std::swap(all[i], all[i + rng() % (nslab_pool - i)]);
    scat[i] = all[i] * kSlab;
    cont[i] = static_cast<int64_t>(i) * kSlab;
  }
  int64_t *d_scat = nullptr, *d_cont = nullptr;
  PROBE_CHECK(cudaMalloc(&d_scat, scat.size() * 8));
  PROBE_CHECK(cudaMalloc(&d_cont, cont.size() * 8));
  PROBE_CHECK(cudaMemcpy(d_scat, scat.data(), scat.size() * 8, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(d_cont, cont.data(), cont.size() * 8, cudaMemcpyHostToDevice));

  cudaDeviceProp prop;
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double ceil = copy_ceiling_gbs(ca, cb, copy_bytes);
  const double mib = static_cast<double>(n) * kSlab / (1 << 20);
  std::printf("device %s, %d SMs; copy ceiling %.0f GB/s; %d slabs of 32 KiB (%.0f MiB) per launch, pool %.1f GiB\n",
              prop.name, prop.multiProcessorCount, ceil, n, mib, pool_gib);
  std::printf("%-12s %-10s %9s %9s %10s %10s\n", "loader", "pattern", "cold_us", "queued_us", "cold_frac",
              "queued_frac");
  std::vector<Loader> loaders = {
      {"ldg E=1", &ldg_kernel<1>, 1, 256, 0},
      {"ldg E=2", &ldg_kernel<2>, 2, 256, 0},
      {"ldg E=4", &ldg_kernel<4>, 4, 256, 0},
      {"cpasync E=1", &cpasync_kernel<1>, 1, 256, kSlab},
      {"cpasync E=2", &cpasync_kernel<2>, 2, 256, 2 * kSlab},
      {"cpasync E=6", &cpasync_kernel<6>, 6, 256, 6 * kSlab},
  };
  if (prop.major >= 9) {
    loaders.push_back({"bulk E=1", &bulk_kernel<1>, 1, 32, kSlab});
    loaders.push_back({"bulk E=2", &bulk_kernel<2>, 2, 32, 2 * kSlab});
    loaders.push_back({"bulk E=6", &bulk_kernel<6>, 6, 32, 6 * kSlab});
  }
  const double bytes = static_cast<double>(n) * kSlab;
  for (const Loader& l : loaders) {
    if (!only.empty() && l.name.find(only) == std::string::npos) continue;
    for (int pat = 0; pat < 2; ++pat) {
      const Timing t = time_loader(l, pool, pat == 0 ? d_scat : d_cont, n, sink, flush, flush_bytes);
      const auto frac = [&](float us) { return bytes / (us * 1e-6) / 1e9 / ceil; };
      std::printf("%-12s %-10s %9.2f %9.2f %10.3f %10.3f\n", l.name.c_str(), pat == 0 ? "scattered" : "contiguous",
                  t.cold_us, t.queued_us, frac(t.cold_us), frac(t.queued_us));
    }
  }
  return 0;
}
