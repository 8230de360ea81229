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
// Launched without programmatic dependent launch (it measured no faster here: no
// difference at B = 1 or 8 behind block_topk, 0.018-0.019 ms queued).
//
// Cluster size: the largest power of two <= 16 (and <= the next power of two >= k) whose
// grid (groups x C CTAs, one per SM at most) fits the SMs. Where the occupancy calculator
// says fewer clusters of C than groups can be resident at once, the C ranks of a group run
// as plain CTAs and merge through global memory instead (halving C until the clusters fit
// leaves SMs idle: slower). B = 8 at the reference shapes: 32 groups x C = 4 (4 blocks per
// CTA, 128 CTAs, global merge: 30 of 32 clusters of 4 fit); B = 1: 4 x 16 in clusters.
// The test hook cluster_merge = 1 (Tuning) merges through global memory always.
// Measured on the H200 (docs/performance.md, "Sparse attention, decode"): at B = 8, 1M
// (32 MiB) this kernel takes ~17 us under ncu (22 us with C = 2 clusters on 64 SMs), the
// split-KV kernel of attention/decode_split.cu 23 us, while loaders that only read the same
// slabs take ~10.5 us (msa-slab-probe): the per-CTA chain (ids, pages, slabs, in-order
// compute, merge) bounds it, not the bytes in flight. Measured slower or no faster: L2
// prefetches of the later slabs, stages fed by one bulk copy per 256-byte row on mbarriers
// (42 us: the copy engine's rate on small copies), a rescale slack in the online softmax,
// stages filled by TMA tile loads on mbarriers (17.6-18.1 us against 17.1-17.2 at B = 8,
// 1M: the barrier waits they remove are waits for data), two CTAs per SM (3 stages, q
// re-read from shared memory), forced cluster sizes (each slower or equal).
// This file: the choice of C, merge and stages, and the launch; the kernel and its device
// helpers are in decode_cluster_kernel.cuh.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/sparse_block_attention/decode_cluster_kernel.cuh"

namespace msa::cuda {
namespace {
using namespace dec;

// Stages for E blocks per rank: every half in flight at once where it fits (2E + 1).
int stages_for(int E) { return E == 1 ? 3 : (E == 2 ? 5 : 6); }

using KernelPtr = void (*)(ClParams);

// The instantiation for (dt, NS) and its dynamic shared memory.
std::pair<KernelPtr, int> kernel_for(hal::DType dt, int NS) {
  const auto pick = [&](auto dt_tag) -> std::pair<KernelPtr, int> {
    constexpr int DT = decltype(dt_tag)::value;
    if (NS == 3) return {&cluster_decode_kernel<DT, 3>, ClLayout<3>::BYTES};
    if (NS == 5) return {&cluster_decode_kernel<DT, 5>, ClLayout<5>::BYTES};
    return {&cluster_decode_kernel<DT, 6>, ClLayout<6>::BYTES};
  };
  if (dt == hal::DType::bf16) return pick(std::integral_constant<int, kBF16>{});
  return pick(std::integral_constant<int, kF16>{});
}

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

}  // namespace

void launch_decode_cluster(Stream& st, const SparseParams& sp, hal::DType dt) {
  const DeviceProps& pr = st.props();
  const int64_t groups = attn_geom::decode_sparse_groups(attn_call(st, sp, dt));
  if (groups <= 0) return;
  int kpow = 1;
  while (kpow < sp.k) kpow *= 2;
  int C = 1;
  while (C * 2 <= std::min(kMaxC, kpow) && groups * C * 2 <= pr.sm_count) C *= 2;
  ClParams p;
  p.sp = sp;
  p.guess_b = sp.NQ == sp.bt.B ? 1 : 0;
  p.scale_log2 = sp.scale * 1.4426950408889634f;
  const bool global_always = st.tuning().cluster_merge == 1;
  // Global merge needs this stream's counters and groups that fit them.
  const int slot = groups > kGmPerSlot ? -1 : stream_slot(st, kGmSlots);
  for (;;) {
    p.C = C;
    p.E = (sp.k + C - 1) / C;
    const auto [kern, smem] = kernel_for(dt, stages_for(p.E));
    prepare(kern, smem, pr.index);
    const int fit = max_clusters(kern, smem, C, pr.index);
    const bool clusters_fit = fit > 0 && fit >= groups;
    p.gmerge = C > 1 && slot >= 0 && (global_always || !clusters_fit) ? 1 : 0;
    if (!p.gmerge) {
      if (fit <= 0 && C == 1)
        throw Error("decode_cluster: internal error: the kernel cannot be resident on " + pr.name +
                    " (occupancy 0 for one CTA)");
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
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = p.gmerge ? 1u : static_cast<unsigned>(C);  // global merge: plain CTAs
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    MSA_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kern, p));
    MSA_CUDA_CHECK_LAUNCH();
    return;
  }
}

}  // namespace msa::cuda
