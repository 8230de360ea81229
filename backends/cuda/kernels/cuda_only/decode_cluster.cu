// CUDA-only (sm_90) decode sparse_block_attention for the reference shapes: GQA group of
// 16 query heads, head dim 128, KV blocks of 128 tokens, bf16/f16 (the M3 configuration).
//
// Latency first. One thread-block cluster of C CTAs serves one (query token, KV head); CTA
// (rank r) takes E = ceil(k / C) of the k selected blocks, i.e. the (page, KV head) slabs
// of 32 KiB of K and 32 KiB of V, which are contiguous. Each slab is one "half": a whole
// rank's halves (up to NS - 1 of them, NS = 3 / 5 / 6 stages of 32 KiB) are requested at
// once with cp.async (16 bytes per thread and instruction, rows past the valid keys zero-
// filled by the copy: cache slack, NaN included, is never read), so a CTA has up to
// 160 KiB in flight from its first microsecond. 8 warps: warp w takes keys 16w..16w+15
// of every block, S = Q K^T and O += P V on mma.sync m16n8k16 (the 16 heads are M), an
// online softmax per warp, P rounded to the input dtype, O in registers. The 8 warps are
// combined in shared memory (fixed order), then the C ranks through distributed shared
// memory: after a cluster barrier rank r reads rows [r*16/C, (r+1)*16/C) of every rank's
// partial (O, max, sum) in rank order and writes those rows of out and lse once. A second
// cluster barrier keeps every CTA's shared memory alive until its readers are done.
// Deterministic (fixed merge order), no allocation, no host sync: graph-capturable.
// Programmatic dependent launch only with MSA_CUDA_DECODE_CLUSTER_PDL=1 (it measured
// slower or no faster here, see pdl_enabled).
//
// Cluster size: the largest power of two <= 16 (and <= the next power of two >= k) whose
// grid (groups x C CTAs, one per SM at most) fits the SMs. Where the occupancy calculator
// says fewer clusters of C than groups can be resident at once, the C ranks of a group run
// as plain CTAs and merge through global memory instead (merge_global; halving C until
// the clusters fit leaves SMs idle). B = 8 at the reference shapes:
// 32 groups x C = 4 (4 blocks per CTA, 128 CTAs, global merge: 30 of 32 clusters of 4
// fit); B = 1: 4 x 16 in clusters. MSA_CUDA_DECODE_CLUSTER_MERGE=1 / 2: clusters only
// (halving C) / global merge always.
// MSA_CUDA_DECODE_CLUSTER=0 turns this kernel off (the split-KV kernel of
// decode_attention.cu runs); MSA_CUDA_DECODE_CLUSTER_SIZE=n (1, 2, 4, 8, 16) forces C;
// MSA_CUDA_DECODE_CLUSTER_OCC=2 builds for two CTAs per SM (3 stages, q re-read from
// shared memory); MSA_CUDA_DECODE_CLUSTER_TMA=1 fills the stages by TMA tile loads on
// mbarriers instead of cp.async (checked, no faster: off by default, see tma_enabled);
// MSA_CUDA_DECODE_CLUSTER_LOG=1 prints the launch geometry.
// Measured on the H200 (docs/performance.md, "Sparse attention, decode"): at B = 8, 1M
// (32 MiB) this kernel takes ~17 us under ncu (22 us with C = 2 clusters on 64 SMs), the
// split-KV kernel of decode_attention.cu 23 us, while loaders that only read the same
// slabs take ~10.5 us (msa-slab-probe): the per-CTA chain (ids, pages, slabs, in-order
// compute, merge) bounds it, not the bytes in flight. Measured slower or no faster: L2
// prefetches of the later slabs, stages fed by one bulk copy per 256-byte row on mbarriers
// (42 us: the copy engine's rate on small copies), a rescale slack in the online softmax.
// This file: the choice of C, merge and stages, and the launch; the kernel and its device
// helpers are in decode_cluster_kernel.cuh.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/kernels/cuda_only/decode_cluster_kernel.cuh"
#include "backends/cuda/kernels/cuda_only/hopper_probe.h"
#include "backends/cuda/kernels/cuda_only/tensor_map.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"

namespace msa::cuda {
namespace {
using namespace dec;

bool cluster_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER", 1) != 0;
  return on;
}
int forced_cluster_size() {
  static const int c = env_int("MSA_CUDA_DECODE_CLUSTER_SIZE", 0);
  return (c == 1 || c == 2 || c == 4 || c == 8 || c == 16) ? c : 0;
}
// Programmatic dependent launch: off unless MSA_CUDA_DECODE_CLUSTER_PDL=1. On the H200,
// with the wait after the parameter math, it makes no difference at B = 1 or 8 behind
// block_topk (0.018-0.019 ms queued), and one measurement with the wait at the kernel's
// start gave 43.4 us queued at B = 8, 1M with it and 27.8 without; the split-KV kernel
// gains 1-2 us from it.
bool pdl_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER_PDL", 0) != 0 && env_int("MSA_CUDA_DECODE_PDL", 1) != 0;
  return on;
}
// Stages fed by cp.async and a block barrier per half (the default) or by TMA tile loads
// on mbarriers (MSA_CUDA_DECODE_CLUSTER_TMA=1). Both pass every check, but the TMA
// stages measure no faster: B = 8, 1M 17.6-18.1 us against 17.1-17.2, B = 1 the
// same; the barrier waits they remove are waits for data. Two CTAs per SM always use
// cp.async.
bool tma_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER_TMA", 0) != 0;
  return on;
}
// The K and V caches as TMA maps ([P x Hkv x 128 rows][128], boxes of 64 x 128, 128-byte
// swizzle); false (the cp.async stages run) when they cannot be encoded, e.g. past 2^31
// rows (TMA row coordinates are int32).
bool make_kv_maps(const SparseParams& sp, hal::DType dt, CUtensorMap& mk, CUtensorMap& mv) {
  const int64_t rows = sp.bt.P * sp.Hkv * int64_t{kBs};
  const CUtensorMapDataType t =
      dt == hal::DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return make_map_sw128(&mk, sp.kc, rows, kD, kBs, t) && make_map_sw128(&mv, sp.vc, rows, kD, kBs, t);
}
// CTAs per SM the kernel is built for (1 or 2).
int occupancy_mode() {
  static const int n = env_int("MSA_CUDA_DECODE_CLUSTER_OCC", 1) == 2 ? 2 : 1;
  return n;
}
// How the C ranks of a group merge: 0 (auto) through distributed shared memory when the
// clusters all fit at once, else through global memory at the same C (plain CTAs: every
// SM busy instead of fewer ranks per cluster); 1 always clusters (lowering C until they
// fit); 2 always global memory.
int merge_mode() {
  static const int m = static_cast<int>(
      parse_env_int("MSA_CUDA_DECODE_CLUSTER_MERGE", std::getenv("MSA_CUDA_DECODE_CLUSTER_MERGE"), 0, 0, 2));
  return m;
}
// MSA_CUDA_DECODE_CLUSTER_LOG=1: each new launch geometry and, every 4096 launches, the
// mean host time of the launch call, on stderr.
bool log_enabled() {
  static const bool on = env_int("MSA_CUDA_DECODE_CLUSTER_LOG", 0) != 0;
  return on;
}

// Whether the driver accepts programmatic launch together with clusters: -1 not known yet,
// 1 yes, 0 refused. Only an uncaptured launch may find out: a refused launch inside a
// stream capture would invalidate the capture.
std::atomic<int> pdl_with_clusters{-1};

// Stages for E blocks per rank: every half in flight at once where it fits (2E + 1); 3
// for two CTAs per SM.
int stages_for(int E, int occ) { return occ == 2 || E == 1 ? 3 : (E == 2 ? 5 : 6); }

// Runs fn(kernel, dynamic smem bytes) with the instantiation for (dt, NS, occ, tma); TMA
// stages only with one CTA per SM (+ 1024 bytes to align them).
template <class F>
void with_kernel(hal::DType dt, int NS, int occ, bool tma, F&& fn) {
  const auto pick = [&](auto dt_tag) {
    constexpr int DT = decltype(dt_tag)::value;
    if (occ == 2)
      fn(&cluster_decode_kernel<DT, 3, 2, false>, ClLayout<3>::BYTES);
    else if (tma && NS == 3)
      fn(&cluster_decode_kernel<DT, 3, 1, true>, ClLayout<3>::BYTES + 1024);
    else if (tma && NS == 5)
      fn(&cluster_decode_kernel<DT, 5, 1, true>, ClLayout<5>::BYTES + 1024);
    else if (tma)
      fn(&cluster_decode_kernel<DT, 6, 1, true>, ClLayout<6>::BYTES + 1024);
    else if (NS == 3)
      fn(&cluster_decode_kernel<DT, 3, 1, false>, ClLayout<3>::BYTES);
    else if (NS == 5)
      fn(&cluster_decode_kernel<DT, 5, 1, false>, ClLayout<5>::BYTES);
    else
      fn(&cluster_decode_kernel<DT, 6, 1, false>, ClLayout<6>::BYTES);
  };
  if (dt == hal::DType::bf16)
    pick(std::integral_constant<int, kBF16>{});
  else
    pick(std::integral_constant<int, kF16>{});
}

using KernelPtr = void (*)(CUtensorMap, CUtensorMap, ClParams);

// Once per kernel and device: dynamic shared memory and non-portable cluster sizes.
void prepare(KernelPtr k, int smem, int device) {
  static std::mutex mu;
  static std::map<std::pair<KernelPtr, int>, bool> done;
  std::lock_guard<std::mutex> lock(mu);
  if (done[{k, device}]) return;
  MSA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  MSA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  done[{k, device}] = true;
}

// Clusters of C CTAs that can be resident at once (cached per kernel, C and device).
int max_clusters(KernelPtr k, int smem, int C, int device) {
  static std::mutex mu;
  static std::map<std::tuple<KernelPtr, int, int>, int> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache.find({k, C, device});
    if (it != cache.end()) return it->second;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(C));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(C);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, k, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it, treat as "does not fit"
    n = 0;
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[{k, C, device}] = n;
  return n;
}

void log_launch(int64_t groups, int C, int E, int NS, int occ, bool tma, int fit, int smem, bool pdl, int gmerge,
                std::chrono::steady_clock::duration host) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int, int, int>, int> seen;
  static double sum_us = 0;
  static long n = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (seen[{groups, C, E, occ}]++ == 0)
    std::fprintf(
        stderr,
        "decode_cluster: groups %lld, C %d, E %d, NS %d, %d CTA/SM, stages by %s, %d clusters fit, smem %d, pdl %d, "
        "merge %s\n",
        static_cast<long long>(groups), C, E, NS, occ, tma ? "TMA" : "cp.async", fit, smem, pdl ? 1 : 0,
        gmerge ? "global" : "cluster");
  sum_us += std::chrono::duration<double, std::micro>(host).count();
  if (++n % 4096 == 0) std::fprintf(stderr, "decode_cluster: mean launch call %.2f us over %ld\n", sum_us / n, n);
}

}  // namespace

bool launch_decode_sparse_cluster(Stream& st, const SparseParams& sp, hal::DType dt) {
  const DeviceProps& pr = st.props();
  if (!cluster_enabled() || !st.tuning().native() || pr.cc_major < 9) return false;
  if (!hopper_code_present(pr.index)) return false;  // a build without sm_90 code (e.g. 80 only)
  if (dt != hal::DType::bf16 && dt != hal::DType::f16) return false;
  if (sp.D != kD || sp.bt.Bs != kBs || sp.G != kGrp || sp.tpc != 1 || sp.k < 1 || sp.k > kMaxE) return false;
  if (sp.bt.T <= 0 || sp.bt.T > kMaxT || (sp.Hs != 1 && sp.Hs != sp.Hkv)) return false;
  const auto a16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!a16(sp.q) || !a16(sp.kc) || !a16(sp.vc) || !a16(sp.o.out)) return false;
  const int64_t groups = sp.NQ * sp.Hkv * sp.nrc;
  if (groups <= 0) return true;
  if (groups > INT32_MAX / kMaxC) return false;  // grid groups x C must fit gridDim.x (2^31 - 1)

  int kpow = 1;
  while (kpow < sp.k) kpow *= 2;
  const int occ = occupancy_mode();
  int C = forced_cluster_size();
  const bool forced = C != 0;
  if (!forced) {
    C = 1;
    while (C * 2 <= std::min(kMaxC, kpow) && groups * C * 2 <= int64_t{occ} * pr.sm_count) C *= 2;
  }
  ClParams p;
  p.sp = sp;
  p.guess_b = sp.NQ == sp.bt.B ? 1 : 0;
  p.scale_log2 = sp.scale * 1.4426950408889634f;
  const int mode = merge_mode();
  CUtensorMap mk{}, mv{};  // unused by the cp.async stages
  const bool tma = occ == 1 && tma_enabled() && make_kv_maps(sp, dt, mk, mv);
  // Global merge needs this stream's counters and groups that fit them.
  const int slot = mode == 1 || groups > kGmPerSlot ? -1 : stream_slot(st, kGmSlots);
  for (;;) {
    p.C = C;
    p.E = (sp.k + C - 1) / C;
    KernelPtr kern = nullptr;
    int smem = 0;
    with_kernel(dt, stages_for(p.E, occ), occ, tma, [&](KernelPtr k, int bytes) {
      kern = k;
      smem = bytes;
    });
    prepare(kern, smem, pr.index);
    const int fit = max_clusters(kern, smem, C, pr.index);
    const bool clusters_fit = fit > 0 && (forced || fit >= groups);
    p.gmerge = C > 1 && slot >= 0 && (mode == 2 || !clusters_fit) ? 1 : 0;
    if (!p.gmerge) {
      if (fit <= 0 && C == 1) return false;  // cannot launch at all: the other kernels run
      if (C > 1 && !clusters_fit) {
        C /= 2;  // fewer ranks per cluster place more easily
        continue;
      }
    } else {
      p.ws = static_cast<float*>(st.workspace(static_cast<size_t>(groups) * C * kGmStride * sizeof(float)));
      p.slot = slot;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(groups * C));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = static_cast<size_t>(smem);
    cfg.stream = st.native();
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = p.gmerge ? 1u : static_cast<unsigned>(C);  // global merge: plain CTAs
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    bool try_pdl = false;
    if (pdl_enabled()) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      MSA_CUDA_CHECK(cudaStreamIsCapturing(st.native(), &capture));
      const int known = pdl_with_clusters.load();
      try_pdl = known == 1 || (known == -1 && capture == cudaStreamCaptureStatusNone);
    }
    cfg.numAttrs = try_pdl ? 2 : 1;
    const auto t0 = std::chrono::steady_clock::now();
    cudaError_t err = cudaLaunchKernelEx(&cfg, kern, mk, mv, p);
    if (try_pdl) {
      if (err == cudaSuccess) {
        pdl_with_clusters.store(1);
      } else {
        // Refused: retry plain. Only when the plain launch works was it programmatic
        // launch with clusters that the driver refused: then launch plain from now on.
        (void)cudaGetLastError();
        cfg.numAttrs = 1;
        err = cudaLaunchKernelEx(&cfg, kern, mk, mv, p);
        if (err == cudaSuccess) pdl_with_clusters.store(0);
      }
    }
    MSA_CUDA_CHECK(err);
    MSA_CUDA_CHECK_LAUNCH();
    if (log_enabled())
      log_launch(groups, C, p.E, stages_for(p.E, occ), occ, tma, fit, smem, cfg.numAttrs == 2, p.gmerge,
                 std::chrono::steady_clock::now() - t0);
    return true;
  }
}

}  // namespace msa::cuda
