// patch_attention_3d_backward: dq, dk, dv of patch_attention_3d in f32, tiled in the
// FlashAttention-2 backward way (backward_tiles.cuh). The forward's chunk kernel validates
// `items` and cuts every window into chunks; tile_delta_kernel computes dot(dout, out) per row;
// then
//  - key_grads_kernel: one CTA per (chunk of kTileKeys keys, head) stages that K/V tile
//    once and loops over the window's query tiles (q, dout, lse, delta staged), adding
//    P^T dout and dS^T q into per-thread dK/dV registers;
//  - query_grads_kernel: one CTA per (chunk of BQ queries, head) stages its query tile and
//    loops over the window's key tiles, recomputing P and dS and adding dS K into dQ.
// Every gradient element is owned by one thread and summed in window order: no atomics,
// deterministic.
//
// Cost (W-token windows, head dim D): each CTA does O(tile * W * D) FMAs from shared
// memory per O((tile + W) * D) staged elements, so the K/V (resp. q/dout) traffic is
// amortised over the 32 keys (BQ queries) of the tile instead of reloaded per row as a
// one-CTA-per-row kernel does; the FMA loops read ~1 shared word per 2-4 FMAs.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/backward_tiles.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"
#include "backends/cuda/kernels/portable/training_rows.cuh"

namespace msa::MSA_GPU_NS {
namespace {

struct PatchGrad {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* dout = nullptr;
  const float* lse = nullptr;
  const float* delta = nullptr;
  const int4* key_chunks = nullptr;    // {first token, tokens, window start, window end}
  const int* key_count = nullptr;      // chunks of kTileKeys tokens (0 when items is invalid)
  const int4* query_chunks = nullptr;  // the same in chunks of BQ tokens
  const int* query_count = nullptr;
  int64_t N = 0;
  int H = 1, D = 0;
  float scale = 1.0f;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
};

// Persistent over (key chunk, head).
template <int DT, int DP>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) key_grads_kernel(PatchGrad p) {
  extern __shared__ __align__(16) char tiles_mem[];
  BwdTiles<DP>& s = *reinterpret_cast<BwdTiles<DP>*>(tiles_mem);
  constexpr int BQ = BwdTiles<DP>::BQ;
  const int64_t work = int64_t{*p.key_count} * p.H;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int4 ch = p.key_chunks[w / p.H];
    const int h = static_cast<int>(w % p.H);
    __syncthreads();  // the previous item is done with the tiles
    const auto key_off = [&](int r) { return r < ch.y ? (int64_t{ch.x + r} * p.H + h) * p.D : int64_t{-1}; };
    stage_keys<DT, DP>(s, p.k, p.v, p.D, key_off);
    KeyGrads<DP> acc;
    for (int q0 = ch.z; q0 < ch.w; q0 += BQ) {
      const int nq = min(BQ, ch.w - q0);
      __syncthreads();  // K/V staged; the previous query tile is consumed
      stage_queries<DT, DP>(s, p.q, p.dout, p.lse, p.delta, p.D,
                            [&](int r) { return r < nq ? int64_t{q0 + r} * p.H + h : int64_t{-1}; });
      __syncthreads();
      score_tile<DP, true>(s, ch.y, p.scale);
      __syncthreads();
      acc.add(s, nq);
    }
    acc.store(p.dk, p.dv, p.D, key_off);
  }
}

// Persistent over (query chunk, head); zeroes dq, dk, dv when items was invalid (no
// chunks: the call is flagged).
template <int DT, int DP>
__global__ void __launch_bounds__(kTileThreads, kTileMinBlocks) query_grads_kernel(PatchGrad p) {
  extern __shared__ __align__(16) char tiles_mem[];
  BwdTiles<DP>& s = *reinterpret_cast<BwdTiles<DP>*>(tiles_mem);
  const int count = *p.query_count;
  if (count == 0) {
    const int64_t n = p.N * p.H * p.D;
    for (int64_t i = int64_t{blockIdx.x} * kTileThreads + threadIdx.x; i < n; i += int64_t{gridDim.x} * kTileThreads)
      p.dq[i] = p.dk[i] = p.dv[i] = 0.0f;
    return;
  }
  const int64_t work = int64_t{count} * p.H;
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int4 ch = p.query_chunks[w / p.H];
    const int h = static_cast<int>(w % p.H);
    __syncthreads();  // the previous item is done with the tiles
    const auto row_of = [&](int r) { return r < ch.y ? int64_t{ch.x + r} * p.H + h : int64_t{-1}; };
    stage_queries<DT, DP>(s, p.q, p.dout, p.lse, p.delta, p.D, row_of);
    QueryGrads<DP> acc;
    for (int k0 = ch.z; k0 < ch.w; k0 += kTileKeys) {
      const int nk = min(kTileKeys, ch.w - k0);
      __syncthreads();  // queries staged; the previous key tile is consumed
      stage_keys<DT, DP>(s, p.k, p.v, p.D,
                         [&](int r) { return r < nk ? (int64_t{k0 + r} * p.H + h) * p.D : int64_t{-1}; });
      __syncthreads();
      score_tile<DP, false>(s, nk, p.scale);
      __syncthreads();
      acc.add(s);
    }
    acc.store(p.dq, p.D, row_of);
  }
}

}  // namespace

void patch_attention_3d_backward(hal::Stream& s, const ops::PatchAttention3dBackwardArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const int n_items = static_cast<int>(a.items.dim(0));
  if (N == 0 && n_items == 0) return;
  auto& st = gpu_stream(s);
  const int BQ = D <= 96 ? tile_queries<96>() : tile_queries<128>();
  // Chunks of `rows` tokens: N / rows full ones plus at most one partial chunk per window.
  const int64_t key_chunks = N / kTileKeys + N + 1, query_chunks = N / BQ + N + 1;
  char* ws = static_cast<char*>(st.workspace(static_cast<size_t>(key_chunks + query_chunks) * sizeof(int4) + 64 +
                                             static_cast<size_t>(N * H) * sizeof(float)));
  auto* key_count = reinterpret_cast<int*>(ws);
  auto* query_count = reinterpret_cast<int*>(ws + 16);
  auto* key_table = reinterpret_cast<int4*>(ws + 64);
  auto* query_table = key_table + key_chunks;
  const int32_t* items = n_items > 0 ? a.items.data<int32_t>() : nullptr;
  patch_chunks_kernel<<<1, kWarp, 0, st.native()>>>(items, n_items, N, a.window, key_table, key_chunks, key_count,
                                                    st.error_flag(), kTileKeys);
  MSA_CUDA_CHECK_LAUNCH();
  patch_chunks_kernel<<<1, kWarp, 0, st.native()>>>(items, n_items, N, a.window, query_table, query_chunks, query_count,
                                                    st.error_flag(), BQ);
  MSA_CUDA_CHECK_LAUNCH();
  if (N == 0 || H == 0) return;
  PatchGrad p;
  p.q = a.q.data<void>();
  p.k = a.k.data<void>();
  p.v = a.v.data<void>();
  p.dout = a.dout.data<void>();
  p.lse = a.lse.data<float>();
  p.delta = reinterpret_cast<float*>(query_table + query_chunks);
  p.key_chunks = key_table;
  p.key_count = key_count;
  p.query_chunks = query_table;
  p.query_count = query_count;
  p.N = N;
  p.H = static_cast<int>(H);
  p.D = static_cast<int>(D);
  p.scale = a.scale;
  p.dq = a.dq.data<float>();
  p.dk = a.dk.data<float>();
  p.dv = a.dv.data<float>();
  constexpr int kDeltaThreads = 256;
  const int64_t cap = int64_t{st.props().sm_count} * 8;
  const auto grid = [&](int64_t rows) {
    return static_cast<unsigned>(std::clamp<int64_t>((N / rows + n_items + 1) * H, 1, cap));
  };
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    tile_delta_kernel<DT, kDeltaThreads><<<grid_for(N * H, kDeltaThreads, st.props()), kDeltaThreads, 0, st.native()>>>(
        p.dout, a.out.data<void>(), N * H, p.D, const_cast<float*>(p.delta));
    MSA_CUDA_CHECK_LAUNCH();
    MSA_DISPATCH_TILE_DP(D, DP, {
      const int smem = tiles_smem<key_grads_kernel<DT, DP>, DP>(st);
      key_grads_kernel<DT, DP><<<grid(kTileKeys), kTileThreads, smem, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
      const int smem_q = tiles_smem<query_grads_kernel<DT, DP>, DP>(st);
      query_grads_kernel<DT, DP><<<grid(BwdTiles<DP>::BQ), kTileThreads, smem_q, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace msa::MSA_GPU_NS
