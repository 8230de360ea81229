// patch_attention_3d: bidirectional attention inside windows of `window` temporal
// patches of each visual item. A one-block prep kernel walks `items` (validating it:
// grid dims >= 1, patches summing to N) and writes a chunk table {first token, tokens,
// window start, window end} of up to 16 tokens per chunk (128 for the CUDA flash kernel,
// which takes bf16/f16 calls on the native tier) into the workspace; the main
// kernel loops over (chunk, head) work items with the shared attention core (G = 1:
// 16 tokens of one head per pass; keys strided by H * D).
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"

namespace msa::MSA_GPU_NS {
__global__ void patch_chunks_kernel(const int32_t* __restrict__ items, int n_items, int64_t N, int window,
                                    int4* __restrict__ chunks, int64_t max_chunks, int* count, int* flag,
                                    int rows_per_chunk) {
  if (threadIdx.x != 0) return;
  int64_t tok = 0, nc = 0;
  bool ok = true;
  for (int i = 0; i < n_items && ok; ++i) {
    const int gt = items[3 * i], gh = items[3 * i + 1], gw = items[3 * i + 2];
    if (gt < 1 || gh < 1 || gw < 1) {
      ok = false;
      break;
    }
    const int64_t per_t = int64_t{gh} * gw;
    if (tok + per_t * gt > N) {
      ok = false;
      break;
    }
    for (int w0 = 0; w0 < gt; w0 += window) {
      const int64_t ws = tok + w0 * per_t, we = tok + min(gt, w0 + window) * per_t;
      for (int64_t t = ws; t < we; t += rows_per_chunk) {
        if (nc >= max_chunks) {
          ok = false;
          break;
        }
        chunks[nc++] =
            make_int4(static_cast<int>(t), static_cast<int>(we - t < rows_per_chunk ? we - t : rows_per_chunk),
                      static_cast<int>(ws), static_cast<int>(we));
      }
    }
    tok += per_t * gt;
  }
  if (tok != N) ok = false;
  *count = ok ? static_cast<int>(nc) : 0;
  if (!ok) raise_flag(flag, kErrItems, static_cast<int>(hal::OpId::patch_attention_3d));
}

void patch_attention_3d(hal::Stream& s, const ops::PatchAttention3dArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const int n_items = static_cast<int>(a.items.dim(0));
  if (N == 0 && n_items == 0) return;
  auto& st = gpu_stream(s);
  // The CUDA flash kernel (native tier) takes chunks of flash_patch_rows() tokens.
  const bool flash = N > 0 && flash_patch_ok(st, a.q.dtype, static_cast<int>(D), a.q.data<void>(), a.k.data<void>(),
                                             a.v.data<void>(), a.out.data<void>());
  const int per_chunk = flash ? flash_patch_rows() : kRows;
  // Chunks: N / per_chunk full ones plus at most one partial chunk per window (windows <= N).
  const int64_t max_chunks = N / per_chunk + N + 1;
  char* ws = static_cast<char*>(st.workspace(static_cast<size_t>(max_chunks) * sizeof(int4) + 64));
  PatchParams p;
  p.chunks = reinterpret_cast<const int4*>(ws + 64);
  p.count = reinterpret_cast<const int*>(ws);
  patch_chunks_kernel<<<1, kWarp, 0, st.native()>>>(n_items > 0 ? a.items.data<int32_t>() : nullptr, n_items, N,
                                                    a.window, reinterpret_cast<int4*>(ws + 64), max_chunks,
                                                    reinterpret_cast<int*>(ws), st.error_flag(), per_chunk);
  MSA_CUDA_CHECK_LAUNCH();
  if (N == 0) return;
  p.q = a.q.data<void>();
  p.k = a.k.data<char>();
  p.v = a.v.data<char>();
  p.H = static_cast<int>(H);
  p.D = static_cast<int>(D);
  p.es = static_cast<int>(hal::dtype_size(a.q.dtype));
  p.scale = a.scale;
  p.o.out = a.out.data<void>();
  p.o.lse = a.lse.data<float>();
  if (flash) {
    // The chunk table holds flash_patch_rows() tokens per chunk: only the flash kernel may
    // read it (the kernels below take kRows-token chunks).
    if (!launch_flash_patch(st, p, a.q.dtype))
      throw Error("patch_attention_3d: internal error: the flash kernel refused a call it had accepted");
    return;
  }
  const int64_t want = (N / kRows + n_items + 1) * H;
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(want, 1, int64_t{st.props().sm_count} * 8));
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    if (!launch_tc_patch(st, p, grid, a.q.dtype)) {
      MSA_DISPATCH_DP(D, DP, {
        constexpr int smem = AttnLayout<DT, DP>::BYTES;
        allow_smem<patch_kernel<DT, DP, FmaCore>>(smem, st.props().index);
        patch_kernel<DT, DP, FmaCore><<<grid, kAttnThreads, smem, st.native()>>>(p);
        MSA_CUDA_CHECK_LAUNCH();
      });
    }
  });
}

}  // namespace msa::MSA_GPU_NS
