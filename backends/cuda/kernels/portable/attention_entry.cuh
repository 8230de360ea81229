// The forward attention ops' arguments bound to their kernel parameters (once, for every
// kernel of the op), and the launches of the shared-core kernels (attention_kernels.cuh)
// over an attention core: the portable entries run them with FmaCore, the CUDA backend's
// attention/wmma.cu with its tensor-core core.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"
#include "backends/cuda/kernels/portable/entries.h"
#include "backends/cuda/kernels/portable/paged_batch.cuh"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

// The fields sparse and dense attention share: the batch, q, the caches, the heads, the
// row chunking of the shared-core kernels, the scale and the outputs.
template <class Params, class Args>
void bind_paged_attention(Stream& st, const Args& a, hal::OpId op, Params& p) {
  p.bt = to_batch(st, ops::batch_of(a), a.q.dim(0), a.k_cache.dim(2), a.k_cache.dim(0), op);
  p.q = a.q.template data<void>();
  p.kc = a.k_cache.template data<char>();
  p.vc = a.v_cache.template data<char>();
  p.Hq = static_cast<int>(a.q.dim(1));
  p.Hkv = static_cast<int>(a.k_cache.dim(1));
  p.G = p.Hq / p.Hkv;
  p.D = static_cast<int>(a.q.dim(2));
  p.es = static_cast<int>(hal::dtype_size(a.q.dtype));
  p.tpc = std::max(1, kRows / p.G);
  p.scale = a.scale;
  p.o.out = a.out.template data<void>();
  p.o.lse = a.lse.template data<float>();
}

// false: the call has no work (nothing is bound or launched).
bool bind_sparse_attention(Stream& st, const ops::SparseAttentionArgs& a, SparseParams& p);
bool bind_dense_attention(Stream& st, const ops::DenseAttentionArgs& a, DenseParams& p);
// Launches the one-block prep kernel that validates `items` and writes the chunk table of
// up to rows_per_chunk tokens per chunk into the workspace; false: no patches (N = 0).
bool bind_patch_attention(Stream& st, const ops::PatchAttention3dArgs& a, int rows_per_chunk, PatchParams& p);

// The portable kernels on bound parameters (the CUDA entries' portable route).
void launch_sparse_attention_portable(Stream& st, SparseParams& p, hal::DType dt);
void launch_dense_attention_portable(Stream& st, DenseParams& p, hal::DType dt);
void launch_patch_attention_portable(Stream& st, const PatchParams& p, hal::DType dt);

// ---- shared-core launches, templated over the core ---------------------------------------
// Sparse: one block per (query block, KV head, row chunk, split), split partials merged.
template <class Core, int DT>
void run_sparse_tiles(Stream& st, SparseParams& p) {
  const int64_t rows = int64_t{p.bt.T} * p.Hq;
  const int64_t base = p.NQ * p.Hkv * p.nrc;
  p.S = choose_splits(base, p.k, rows, p.D, st.props());
  if (p.S > 1) split_buffers(st, p.S, rows, p.D, p.o);
  const unsigned grid = static_cast<unsigned>(base * p.S);
  MSA_DISPATCH_DP(p.D, DP, {
    constexpr int smem = Core::template Layout<DT, DP>::BYTES;
    allow_smem<sparse_kernel<DT, DP, Core>>(smem, st.props().index);
    sparse_kernel<DT, DP, Core><<<grid, kAttnThreads, smem, st.native()>>>(p);
    MSA_CUDA_CHECK_LAUNCH();
  });
  if (p.S > 1) launch_merge<DT>(st, p.o, p.S, rows, p.D, p.o.out, p.o.lse);
}

// Dense: one block per (token chunk slot, KV head, split), split partials merged.
template <class Core, int DT>
void run_dense_tiles(Stream& st, DenseParams& p) {
  const int64_t T = p.bt.T;
  const int64_t slots = (T + p.tpc - 1) / p.tpc + p.bt.B;
  const int64_t rows = T * p.Hq;
  const int64_t base = ((T + p.tpc - 1) / p.tpc) * p.Hkv;
  p.S = choose_splits(base, p.bt.max_blocks, rows, p.D, st.props());
  p.bps = (p.bt.max_blocks + p.S - 1) / p.S;
  if (p.S > 1) split_buffers(st, p.S, rows, p.D, p.o);
  const unsigned grid = static_cast<unsigned>(slots * p.Hkv * p.S);
  MSA_DISPATCH_DP(p.D, DP, {
    constexpr int smem = Core::template Layout<DT, DP>::BYTES;
    allow_smem<dense_kernel<DT, DP, Core>>(smem, st.props().index);
    dense_kernel<DT, DP, Core><<<grid, kAttnThreads, smem, st.native()>>>(p);
    MSA_CUDA_CHECK_LAUNCH();
  });
  if (p.S > 1) launch_merge<DT>(st, p.o, p.S, rows, p.D, p.o.out, p.o.lse);
}

// Patch: persistent blocks over (chunk, head) items (p.chunks of kRows tokens).
template <class Core, int DT>
void run_patch_tiles(Stream& st, const PatchParams& p) {
  const int64_t want = (p.N / kRows + p.n_items + 1) * p.H;
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(want, 1, int64_t{st.props().sm_count} * 8));
  MSA_DISPATCH_DP(p.D, DP, {
    constexpr int smem = Core::template Layout<DT, DP>::BYTES;
    allow_smem<patch_kernel<DT, DP, Core>>(smem, st.props().index);
    patch_kernel<DT, DP, Core><<<grid, kAttnThreads, smem, st.native()>>>(p);
    MSA_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace msa::MSA_GPU_NS
