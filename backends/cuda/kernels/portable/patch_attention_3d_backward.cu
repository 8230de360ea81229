// patch_attention_3d_backward: dq, dk, dv of patch_attention_3d in f32. The forward's
// chunk kernel (one token per chunk here) validates `items` and gives every token its
// window; delta_kernel computes dot(dout, out) per row; then one CTA per (token, head)
// owns that row's dq, dk and dv: each warp takes every kWarps-th token s of the window,
// adding s as a key of the row's query (dq) and s as a query of the row's key (dk, dv),
// and the warps' partials are summed in warp order. No atomics: deterministic.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
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
  const int4* chunks = nullptr;  // chunk t = {t, 1, window start, window end}
  const int* count = nullptr;    // chunks (0 when items is invalid)
  int64_t N = 0;
  int H = 1, D = 0;
  float scale = 1.0f;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
};

// Persistent: loops over the N x H rows.
template <int DT, int kThreads>
__global__ void __launch_bounds__(kThreads) patch_backward_kernel(PatchGrad p) {
  constexpr int kWarps = kThreads / kWarp;
  __shared__ float s_red[kMaxHeadDim];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int D = p.D;
  const int count = *p.count;
  for (int64_t w = blockIdx.x; w < p.N * p.H; w += gridDim.x) {
    const int64_t t = w / p.H;
    const int h = static_cast<int>(w % p.H);
    int ws = 0, we = 0;  // no window: zero rows (items was invalid and is flagged)
    if (t < count) {
      const int4 ch = p.chunks[t];
      ws = ch.z;
      we = ch.w;
    }
    const int64_t row = t * p.H + h;
    float qt[kLaneDims], kt[kLaneDims], vt[kLaneDims], dt[kLaneDims];
    lane_row<DT>(p.q, row * D, D, lane, qt);
    lane_row<DT>(p.k, row * D, D, lane, kt);
    lane_row<DT>(p.v, row * D, D, lane, vt);
    lane_row<DT>(p.dout, row * D, D, lane, dt);
    const float lt = p.lse[row], delta_t = p.delta[row];
    float dq[kLaneDims] = {}, dk[kLaneDims] = {}, dv[kLaneDims] = {};
    for (int s = ws + warp; s < we; s += kWarps) {
      const int64_t rs = int64_t{s} * p.H + h;
      float qs[kLaneDims], ks[kLaneDims], vs[kLaneDims], ds_[kLaneDims];
      lane_row<DT>(p.q, rs * D, D, lane, qs);
      lane_row<DT>(p.k, rs * D, D, lane, ks);
      lane_row<DT>(p.v, rs * D, D, lane, vs);
      lane_row<DT>(p.dout, rs * D, D, lane, ds_);
      if (!is_neg_inf(lt)) {  // row t as the query, s as the key
        const float pr = expf(p.scale * lane_dot(qt, ks) - lt);
        lane_axpy(dq, p.scale * pr * (lane_dot(dt, vs) - delta_t), ks);
      }
      const float ls = p.lse[rs];
      if (!is_neg_inf(ls)) {  // s as the query, row t as the key
        const float pr = expf(p.scale * lane_dot(qs, kt) - ls);
        lane_axpy(dk, p.scale * pr * (lane_dot(ds_, vt) - p.delta[rs]), qs);
        lane_axpy(dv, pr, ds_);
      }
    }
    const auto flush = [&](const float(&acc)[kLaneDims], float* out) {
      sum_warp_rows<kThreads>(acc, D, s_red);
      for (int d = threadIdx.x; d < D; d += kThreads) out[d] = s_red[d];
      __syncthreads();  // s_red is reused
    };
    flush(dq, p.dq + row * D);
    flush(dk, p.dk + row * D);
    flush(dv, p.dv + row * D);
  }
}

}  // namespace

void patch_attention_3d_backward(hal::Stream& s, const ops::PatchAttention3dBackwardArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const int n_items = static_cast<int>(a.items.dim(0));
  if (N == 0 && n_items == 0) return;
  auto& st = gpu_stream(s);
  const int64_t max_chunks = 2 * N + 1;  // one per token, at most one empty window per token
  char* ws = static_cast<char*>(st.workspace(static_cast<size_t>(max_chunks) * sizeof(int4) + 64 +
                                             static_cast<size_t>(N * H) * sizeof(float)));
  auto* chunks = reinterpret_cast<int4*>(ws + 64);
  auto* count = reinterpret_cast<int*>(ws);
  patch_chunks_kernel<<<1, kWarp, 0, st.native()>>>(n_items > 0 ? a.items.data<int32_t>() : nullptr, n_items, N,
                                                   a.window, chunks, max_chunks, count, st.error_flag(), 1);
  MSA_CUDA_CHECK_LAUNCH();
  if (N == 0 || H == 0) return;
  PatchGrad p;
  p.q = a.q.data<void>();
  p.k = a.k.data<void>();
  p.v = a.v.data<void>();
  p.dout = a.dout.data<void>();
  p.lse = a.lse.data<float>();
  p.delta = reinterpret_cast<float*>(ws + 64 + max_chunks * sizeof(int4));
  p.chunks = chunks;
  p.count = count;
  p.N = N;
  p.H = static_cast<int>(H);
  p.D = static_cast<int>(D);
  p.scale = a.scale;
  p.dq = a.dq.data<float>();
  p.dk = a.dk.data<float>();
  p.dv = a.dv.data<float>();
  constexpr int kDeltaThreads = 256, kThreads = 128;
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(N * H, 1, int64_t{st.props().sm_count} * 16));
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    delta_kernel<DT, kDeltaThreads><<<grid_for(N * H * kWarp, kDeltaThreads, st.props()), kDeltaThreads, 0,
                                      st.native()>>>(p.dout, a.out.data<void>(), N * H, p.D,
                                                     const_cast<float*>(p.delta));
    MSA_CUDA_CHECK_LAUNCH();
    patch_backward_kernel<DT, kThreads><<<grid, kThreads, 0, st.native()>>>(p);
    MSA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace msa::MSA_GPU_NS
