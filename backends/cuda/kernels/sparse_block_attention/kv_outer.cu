// sparse_block_attention, KV-block-outer (token-level selection, Qb = 1, prefill): each
// selected (page, KV head) block is read once per item of up to 128 / G tokens that chose
// it, instead of once per token (kv_outer_kernel.cuh). Per group of tokens (sized so the
// partial outputs take at most attn_geom::kKvoPartialBytes):
//  1. the work setup the KV-block-outer training kernels share (bwd::build_items):
//     sequence info, the selection's inverse index sorted by CUB, its token prefix, each
//     slab's item count scanned into offsets;
//  2. every partial's lse set to -inf (a selection entry that contributes nothing leaves
//     its slot so);
//  3. each item's record and each sorted entry's token, limit and slot (resolve_items_kernel);
//  4. the persistent KV-block-outer kernel writes one partial per (token, head, entry);
//  5. one warp per (token, head) merges its k partials in entry order into out and lse.
// Deterministic: the partials' slots and the merge order follow from the selection.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/attention_backward/mma_items.cuh"
#include "backends/cuda/kernels/sparse_block_attention/kv_outer_kernel.cuh"

namespace msa::cuda {
namespace kvo {
namespace {

constexpr int kPrep = 256;

__global__ void __launch_bounds__(kPrep) fill_ninf_kernel(float* x, int64_t n) {
  for (int64_t i = int64_t{blockIdx.x} * kPrep + threadIdx.x; i < n; i += int64_t{gridDim.x} * kPrep)
    x[i] = __int_as_float(0xff800000u);
}

// Row r (token, head) of the group: its k partials merged in entry order. NaN in any
// partial's lse: a NaN row; none with a finite lse: the empty set (out 0, lse -inf).
template <int DT>
__global__ void __launch_bounds__(kPrep)
    merge_kernel(const char* __restrict__ part_o, const float* __restrict__ part_lse, int64_t rows, int k, int D,
                 typename Elem<DT>::T* __restrict__ out, float* __restrict__ lse) {
  using T = typename Elem<DT>::T;
  const int lane = threadIdx.x & 31;
  const float ninf = __int_as_float(0xff800000u);
  for (int64_t row = (int64_t{blockIdx.x} * kPrep + threadIdx.x) / 32; row < rows;
       row += int64_t{gridDim.x} * (kPrep / 32)) {
    const float* pl = part_lse + row * k;
    float M = ninf;
    bool nan = false;
    for (int j = 0; j < k; ++j) {
      const float x = __ldg(pl + j);
      nan = nan || x != x;
      M = fmaxf(M, x);
    }
    T* orow = out + row * D;
    if (nan || M == ninf) {
      const float v = nan ? quiet_nan() : 0.0f;
      for (int d = lane; d < D; d += 32) orow[d] = Elem<DT>::store(v);
      if (lane == 0) lse[row] = nan ? quiet_nan() : ninf;
      continue;
    }
    float wsum = 0.0f;
    for (int j = 0; j < k; ++j) {
      const float x = __ldg(pl + j);
      if (x != ninf) wsum += expf(x - M);
    }
    const float winv = 1.0f / wsum;
    const char* po = part_o + row * k * D * 2;
    for (int c = lane; c < D / 4; c += 32) {  // 4 values (8 bytes) per lane and partial
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int j = 0; j < k; ++j) {
        const float x = __ldg(pl + j);
        if (x == ninf) continue;  // no partial: its O slot was never written
        const float w = expf(x - M);
        const uint2 raw = __ldg(reinterpret_cast<const uint2*>(po + (int64_t{j} * D + 4 * c) * 2));
        const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[e] = fmaf(w, Elem<DT>::load(v[e]), acc[e]);
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) orow[4 * c + e] = Elem<DT>::store(acc[e] * winv);
    }
    if (lane == 0) lse[row] = M + logf(wsum);
  }
}

template <int DT, int DP>
void run_group(Stream& st, KvoParams& m, const bwd::ItemScratch& x, char* ws, SeqInfo* si, const SparseParams& p,
               int64_t q0, int64_t nq) {
  const DeviceProps& pr = st.props();
  bwd::ItemScratch xg = x;
  xg.ip.E = nq * p.Hs * p.k;  // this group's raw entries (the arrays are sized for the largest group)
  m.sets.qb_first = q0;
  bwd::build_items(st, m, xg, ws, si, true, bwd::list_items_kernel<bwd::EmptyLists::none>, m.Hkv, 0);
  const int64_t slots = nq * p.Hq * p.k;
  fill_ninf_kernel<<<grid_for(slots, kPrep, pr), kPrep, 0, st.native()>>>(m.part_lse, slots);
  MSA_CUDA_CHECK_LAUNCH();
  // A warp per item: enough warps that each resolves one or two items of an 8K chunk.
  resolve_items_kernel<<<static_cast<unsigned>(64 * std::max(1, pr.sm_count)), kResolveThreads, 0, st.native()>>>(m);
  MSA_CUDA_CHECK_LAUNCH();
  using L = KvoLayout<DP>;
  allow_smem<kv_outer_kernel<DT, DP>>(L::BYTES, pr.index);
  kv_outer_kernel<DT, DP><<<static_cast<unsigned>(2 * std::max(1, pr.sm_count)), kThreads, L::BYTES, st.native()>>>(m);
  MSA_CUDA_CHECK_LAUNCH();
  using T = typename Elem<DT>::T;
  const int64_t rows = nq * p.Hq;
  merge_kernel<DT><<<grid_for(rows * 32, kPrep, pr), kPrep, 0, st.native()>>>(
      m.part_o, m.part_lse, rows, p.k, p.D, static_cast<T*>(p.o.out) + q0 * p.Hq * p.D, p.o.lse + q0 * p.Hq);
  MSA_CUDA_CHECK_LAUNCH();
}

// The call's scratch: sequence info, the partials of the largest token group (`per`
// tokens) and the work setup's arrays.
struct KvoScratch {
  int64_t per;
  ScratchPlan plan;
  // Item records: at most one per raw entry and KV head sharing its bucket (Hkv / Hb: a
  // shared selection's page is a slab of every KV head); sorted entries: one per raw entry.
  size_t si_at, po_at, pl_at, rec_at, ent_at;
  bwd::ItemScratch x;

  KvoScratch(const SparseParams& p, int64_t per_group, int Hb)
      : per(per_group),
        si_at(plan.reserve<SeqInfo>(p.bt.B)),
        po_at(plan.reserve<char>(per * p.Hq * p.k * p.D * 2)),
        pl_at(plan.reserve<float>(per * p.Hq * p.k)),
        rec_at(plan.reserve<int4>(per * p.Hs * p.k * (p.Hkv / Hb))),
        ent_at(plan.reserve<int4>(per * p.Hs * p.k)),
        x(plan, per * p.Hs * p.k, p.bt.P * Hb, p.bt.P * p.Hkv, 0) {}
};

int64_t group_tokens(const SparseParams& p) {
  const int64_t T = p.bt.T, tg = attn_geom::kv_outer_group_tokens(p.Hq, p.k, p.D);
  const int64_t groups = (T + tg - 1) / tg;
  return (T + groups - 1) / groups;
}
int slab_heads(const SparseParams& p) { return p.Hs == 1 ? 1 : p.Hkv; }

template <int DT>
void run(Stream& st, const SparseParams& p) {
  const int64_t T = p.bt.T;
  KvoScratch sc(p, group_tokens(p), slab_heads(p));

  KvoParams m;
  m.sets.bt = p.bt;
  m.sets.bidx = p.bidx;
  m.sets.Qb = 1;
  m.sets.k = p.k;
  m.sets.Hs = p.Hs;
  m.sets.NQ = p.NQ;
  m.q = static_cast<const char*>(p.q);
  m.kc = p.kc;
  m.vc = p.vc;
  m.Hq = p.Hq;
  m.Hkv = p.Hkv;
  m.G = p.G;
  m.D = p.D;
  m.k = p.k;
  m.scale_log2 = p.scale * 1.4426950408889634f;
  m.Hb = slab_heads(p);
  m.S = static_cast<int>(p.bt.P * p.Hkv);
  m.tpi = std::max(1, kRows / p.G);

  char* ws = sc.plan.allocate(st);
  auto* si = reinterpret_cast<SeqInfo*>(ws + sc.si_at);
  m.sets.si = si;
  m.part_o = ws + sc.po_at;
  m.part_lse = reinterpret_cast<float*>(ws + sc.pl_at);
  m.rec = reinterpret_cast<int4*>(ws + sc.rec_at);
  m.ent = reinterpret_cast<int4*>(ws + sc.ent_at);
  for (int64_t q0 = 0; q0 < T; q0 += sc.per) {
    MSA_DISPATCH_DP(p.D, DP, run_group<DT, DP>(st, m, sc.x, ws, si, p, q0, std::min(sc.per, T - q0)));
  }
}

// sum += distinct blocks >= 0 among the selections of tokens tpc x blockIdx.x ..
// (tpc of them) for selection head blockIdx.y. Integer atomics: the sum is exact.
__global__ void __launch_bounds__(kPrep)
    union_kernel(const int32_t* bidx, int64_t NQ, int Hs, int k, int tpc, unsigned long long* sum) {
  extern __shared__ int s_sel[];  // tpc x k
  __shared__ int s_cnt;
  const int64_t q0 = int64_t{blockIdx.x} * tpc;
  const int hs = blockIdx.y;
  const int nq = static_cast<int>(min(int64_t{tpc}, NQ - q0)), n = nq * k;
  if (threadIdx.x == 0) s_cnt = 0;
  for (int i = threadIdx.x; i < n; i += kPrep) s_sel[i] = __ldg(bidx + ((q0 + i / k) * Hs + hs) * k + i % k);
  __syncthreads();
  int cnt = 0;
  for (int i = threadIdx.x; i < n; i += kPrep) {
    const int v = s_sel[i];
    bool first = v >= 0;
    for (int j = 0; j < i && first; ++j) first = s_sel[j] != v;
    cnt += first;
  }
  for (int o = 16; o > 0; o >>= 1) cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
  if ((threadIdx.x & 31) == 0 && cnt > 0) atomicAdd(&s_cnt, cnt);
  __syncthreads();
  if (threadIdx.x == 0 && s_cnt > 0) atomicAdd(sum, static_cast<unsigned long long>(s_cnt));
}

}  // namespace
}  // namespace kvo

void launch_sparse_by_union(Stream& st, const SparseParams& p, hal::DType dt) {
  using namespace kvo;
  // kv_outer's scratch first, so a later capture of either kernel finds the workspace
  // large enough (the flash kernel's split partials are at most 512 MiB).
  KvoScratch sc(p, group_tokens(p), slab_heads(p));
  char* ws = sc.plan.allocate(st);
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  MSA_CUDA_CHECK(cudaStreamIsCapturing(st.native(), &cap));
  if (cap == cudaStreamCaptureStatusNone && p.NQ > 0) {
    const int tpc = attn_geom::flash_sparse_tpc(attn_call(st, p, dt));
    const int64_t tiles = (p.NQ + tpc - 1) / tpc;
    auto* sum = reinterpret_cast<unsigned long long*>(ws);  // kv_outer has not started: free
    MSA_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(unsigned long long), st.native()));
    union_kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(p.Hs)), kPrep,
                   static_cast<size_t>(tpc) * p.k * sizeof(int), st.native()>>>(p.bidx, p.NQ, p.Hs, p.k, tpc, sum);
    MSA_CUDA_CHECK_LAUNCH();
    unsigned long long host = 0;
    MSA_CUDA_CHECK(cudaMemcpyAsync(&host, sum, sizeof(host), cudaMemcpyDeviceToHost, st.native()));
    MSA_CUDA_CHECK(cudaStreamSynchronize(st.native()));
    if (choose_by_union(static_cast<int64_t>(host), tiles * p.Hs, tpc, p.k, st.tuning()) ==
        SparseAttentionKernel::flash)
      return launch_flash_sparse(st, p, dt);
  }
  launch_kv_outer_sparse(st, p, dt);
}

void launch_kv_outer_sparse(Stream& st, const SparseParams& p, hal::DType dt) {
  if (dt == hal::DType::bf16)
    kvo::run<kBF16>(st, p);
  else
    kvo::run<kF16>(st, p);
}

}  // namespace msa::cuda
