// patch_attention_3d on the portable tier: bidirectional attention inside windows of
// `window` temporal patches of each visual item. A one-block prep kernel walks `items`
// (validating it: grid dims >= 1, patches summing to N) and writes a chunk table {first
// token, tokens, window start, window end} of up to 16 tokens per chunk (the CUDA
// backend's flash kernel asks for 128) into the workspace; the main kernel loops over
// (chunk, head) work items with the shared attention core (G = 1: 16 tokens of one head
// per pass; keys strided by H * D). The CUDA backend's entry
// (kernels/patch_attention_3d/entry.cu) binds here too.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_entry.cuh"

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

bool bind_patch_attention(Stream& st, const ops::PatchAttention3dArgs& a, int rows_per_chunk, PatchParams& p) {
  const int64_t N = a.q.dim(0);
  const int n_items = static_cast<int>(a.items.dim(0));
  if (N == 0 && n_items == 0) return false;
  // Chunks: N / rows_per_chunk full ones plus at most one partial chunk per window (windows <= N).
  const int64_t max_chunks = N / rows_per_chunk + N + 1;
  char* ws = static_cast<char*>(st.workspace(static_cast<size_t>(max_chunks) * sizeof(int4) + 64));
  p.chunks = reinterpret_cast<const int4*>(ws + 64);
  p.count = reinterpret_cast<const int*>(ws);
  patch_chunks_kernel<<<1, kWarp, 0, st.native()>>>(n_items > 0 ? a.items.data<int32_t>() : nullptr, n_items, N,
                                                    a.window, reinterpret_cast<int4*>(ws + 64), max_chunks,
                                                    reinterpret_cast<int*>(ws), st.error_flag(), rows_per_chunk);
  MSA_CUDA_CHECK_LAUNCH();
  if (N == 0) return false;  // the items were still checked
  p.q = a.q.data<void>();
  p.k = a.k.data<char>();
  p.v = a.v.data<char>();
  p.H = static_cast<int>(a.q.dim(1));
  p.D = static_cast<int>(a.q.dim(2));
  p.es = static_cast<int>(hal::dtype_size(a.q.dtype));
  p.scale = a.scale;
  p.o.out = a.out.data<void>();
  p.o.lse = a.lse.data<float>();
  p.N = N;
  p.n_items = n_items;
  return true;
}

void launch_patch_attention_portable(Stream& st, const PatchParams& p, hal::DType dt) {
  MSA_DISPATCH_ACT(dt, DT, run_patch_tiles<FmaCore, DT>(st, p));
}

void patch_attention_3d_portable(hal::Stream& s, const ops::PatchAttention3dArgs& a) {
  auto& st = gpu_stream(s);
  PatchParams p;
  if (bind_patch_attention(st, a, kRows, p)) launch_patch_attention_portable(st, p, a.q.dtype);
}

}  // namespace msa::MSA_GPU_NS
