// CUDA-only: sparse_block_attention_backward and dense_attention_backward on mma.sync
// tensor cores (sm_80+, bf16/f16 inputs, D a multiple of 16 up to 128, f32 gradients), the
// native tier's replacement of the portable FMA tiles (portable/attention_backward.cuh)
// where choose_attention_backward picks it (choose.h). Same attended sets, validation and
// inverse index as the portable kernels (training_index.cuh); per call:
//  1. seq_info, the inverse index (its keys sorted by CUB's radix sort over the bucket and
//     entry bits), each sorted entry's token count scanned into a prefix (CUB), and each
//     slab's item count scanned likewise;
//  2. delta = dot(dout, out) by the mma chain of the dP tiles (mma.cuh);
//  3. dq, query-outer (mma_dq.cuh);
//  4. dk / dv, KV-block-outer over the inverse index, persistent blocks with an ordered
//     hand-off between the items of a slab (mma_dkdv.cuh).
// Results are bitwise reproducible run to run and across devices: every sum's order
// follows from the inputs and the shape (item sizes come from the shape, not the device).
// training_mma = 0 (MSA_CUDA_TRAINING_MMA) leaves the op to the portable kernels; the hook
// bwd_item_tokens = n forces n tokens per dk/dv item.
#include <algorithm>
#include <climits>

#include "backends/cuda/kernels/attention_backward/mma.h"
#include "backends/cuda/kernels/attention_backward/mma_dkdv.cuh"
#include "backends/cuda/kernels/attention_backward/mma_dq.cuh"
#include "backends/cuda/kernels/attention_backward/mma_items.cuh"
#include "backends/cuda/kernels/portable/attention_backward.cuh"

namespace msa::cuda {
namespace bwd {
namespace {

constexpr int kDeltaThreads = 128;

template <int DT, int DP>
void launch_all(Stream& st, const MmaGrad& m, const PagedBackwardCall& c, float* delta) {
  const DeviceProps& pr = st.props();
  const int64_t T = c.T, rows = T * m.Hq;
  if (T > 0) {
    const unsigned dgrid = static_cast<unsigned>(std::clamp<int64_t>(
        (rows + 16 * (kDeltaThreads / 32) - 1) / (16 * (kDeltaThreads / 32)), 1, int64_t{pr.sm_count} * 16));
    delta_mma_kernel<DT, DP, kDeltaThreads>
        <<<dgrid, kDeltaThreads, 0, st.native()>>>(m.dout, static_cast<const char*>(c.out), rows, m.D, delta);
    MSA_CUDA_CHECK_LAUNCH();
    const DqTiling tl(m.G, 16);
    const int64_t tiles = (T + tl.tile_tokens - 1) / tl.tile_tokens;
    const int64_t units = tiles * m.Hkv * tl.head_chunks;
    constexpr int smem = DqLayout<DP>::BYTES;
    allow_smem<mma_dq_kernel<DT, DP>>(smem, pr.index);
    mma_dq_kernel<DT, DP><<<static_cast<unsigned>((units + kDqWarps - 1) / kDqWarps), kDqThreads, smem, st.native()>>>(
        m, tl, tiles, units, T);
    MSA_CUDA_CHECK_LAUNCH();
  }
  if (m.S > 0) {
    launch_persistent(st, m.sets.bt.Bs, [&](auto kw_tag, unsigned grid) {
      constexpr int KW = decltype(kw_tag)::value;
      using L = DkdvLayout<DP, KW>;
      allow_smem<mma_dkdv_kernel<DT, DP, KW>>(L::BYTES, pr.index);
      mma_dkdv_kernel<DT, DP, KW><<<grid, L::THREADS, L::BYTES, st.native()>>>(m);
    });
  }
}

}  // namespace
}  // namespace bwd

void attention_backward_mma(Stream& st, const PagedBackwardCall& c, const BackwardItems& items) {
  using namespace bwd;
  const PagedGrad& g = c.p;
  const AttendSets& sets = g.sets;
  const bool sparse = sets.bidx != nullptr;
  const int64_t T = c.T, P = c.P, S = items.slabs;
  const int chunks = items.chunks;
  const int64_t Hq = g.Hq;
  ScratchPlan plan;
  const size_t si_at = plan.reserve<SeqInfo>(sets.bt.B);
  const size_t delta_at = plan.reserve<float>(T * Hq);
  const ItemScratch items_at(plan, raw_entries(sets), P * g.Hb, S, S * chunks);  // a flag per slab chunk
  char* ws = plan.allocate(st);

  auto* si = reinterpret_cast<SeqInfo*>(ws + si_at);
  MmaGrad m;
  m.sets = sets;
  m.sets.si = si;
  m.q = static_cast<const char*>(g.q);
  m.dout = static_cast<const char*>(g.dout);
  m.kc = static_cast<const char*>(g.kc);
  m.vc = static_cast<const char*>(g.vc);
  m.lse = g.lse;
  auto* delta = reinterpret_cast<float*>(ws + delta_at);
  m.delta = delta;
  m.Hq = g.Hq;
  m.Hkv = g.Hkv;
  m.G = g.G;
  m.D = g.D;
  m.scale = g.scale;
  m.scale_log2 = g.scale * kLog2e;
  m.dq = g.dq;
  m.dk = g.dk;
  m.dv = g.dv;
  m.Hb = g.Hb;
  m.S = static_cast<int>(S);
  m.chunks = chunks;
  m.tpi = static_cast<int>(items.tpi);
  build_items(st, m, items_at, ws, si, sparse, list_items_kernel<EmptyLists::every>, m.Hkv,
              S * chunks);  // every slab's dk / dv is written

  const bool f16 = c.dtype == hal::DType::f16;
  if (g.D <= 64) {
    if (f16)
      launch_all<kF16, 64>(st, m, c, delta);
    else
      launch_all<kBF16, 64>(st, m, c, delta);
  } else {
    if (f16)
      launch_all<kF16, 128>(st, m, c, delta);
    else
      launch_all<kBF16, 128>(st, m, c, delta);
  }
}

}  // namespace msa::cuda
