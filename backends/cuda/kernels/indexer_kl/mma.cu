// CUDA-only: indexer_kl (docs/training.md, "Op: indexer_kl") on mma.sync tensor cores
// (sm_80+), the native tier's replacement of the portable kernels (portable/indexer_kl.cu)
// where choose_indexer_kl picks it (choose.h). Covers bf16 q, k_cache, qi and ki_cache, D and Di
// multiples of 16 up to 128, groups of G = 1, 2, 4, 8 or 16 query heads (per_kv_head, or
// shared over one KV head). Same attended sets, validation and inverse index as the
// portable kernels (training_index.cuh); per call:
//  1. seq_info, the inverse index (attention_backward/mma_index.cuh), its entries' token prefix, and
//     each (page, selection head) list's item count scanned into offsets;
//  2. the rows kernel (mma_rows.cuh): the student's logsumexp, kl and dqi;
//  3. the dki kernel (mma_dki.cuh): KV-block-outer, ordered items per page.
// Results are bitwise reproducible run to run and across devices: every sum's order
// follows from the inputs and the shape. training_mma = 0 (MSA_CUDA_TRAINING_MMA) leaves
// the op to the portable kernels; the hook kl_item_tokens = n forces n tokens per dki item.
#include <algorithm>
#include <climits>

#include "backends/cuda/kernels/attention_backward/mma_items.cuh"
#include "backends/cuda/kernels/indexer_kl/mma.h"
#include "backends/cuda/kernels/indexer_kl/mma_dki.cuh"
#include "backends/cuda/kernels/indexer_kl/mma_rows.cuh"
#include "backends/cuda/kernels/portable/indexer_kl_sets.cuh"

namespace msa::cuda {
namespace klmma {
namespace {

using bwd::kPrepThreads;

int log2_of(int G) {
  int b = 0;
  while ((1 << b) < G) ++b;
  return b;
}

template <int DT, int DP>
void launch_all(Stream& st, const KlMma& m, int64_t T, int64_t P) {
  const DeviceProps& pr = st.props();
  if (T > 0 && m.Hs > 0) {
    const int tile_tokens = 16 / m.G;
    const int64_t tiles = (T + tile_tokens - 1) / tile_tokens, units = tiles * m.Hs;
    constexpr int smem = KlRowLayout<DP>::BYTES;
    allow_smem<kl_rows_kernel<DT, DP>>(smem, pr.index);
    kl_rows_kernel<DT, DP>
        <<<static_cast<unsigned>((units + kRowWarps - 1) / kRowWarps), kRowThreads, smem, st.native()>>>(
            m, tile_tokens, tiles, units, T);
    MSA_CUDA_CHECK_LAUNCH();
  }
  if (P > 0) {
    bwd::launch_persistent(st, m.sets.bt.Bs, [&](auto kw_tag, unsigned grid) {
      constexpr int KW = decltype(kw_tag)::value;
      using L = KlDkiLayout<DP, KW>;
      allow_smem<kl_dki_kernel<DT, DP, KW>>(L::BYTES, pr.index);
      kl_dki_kernel<DT, DP, KW><<<grid, L::THREADS, L::BYTES, st.native()>>>(m);
    });
  }
}

}  // namespace
}  // namespace klmma

void indexer_kl_mma(Stream& st, const ops::IndexerKlArgs& a, const KlItems& items) {
  using namespace klmma;
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1);
  const int64_t Hs = a.qi.dim(1), Di = a.qi.dim(2);
  const bool shared = a.mode == ops::SelectionMode::shared, sparse = a.stage == ops::KlStage::sparse;
  const int64_t G = Hq / Hkv;
  const int DP = std::max(D, Di) <= 64 ? 64 : 128;
  const int64_t chunks = items.chunks, S = items.lists;
  KlMma m;
  m.sets = kl_attend_sets(st, a);
  const AttendSets& sets = m.sets;
  m.Hb = sparse ? sets.Hs : 1;
  ScratchPlan plan;
  const size_t si_at = plan.reserve<SeqInfo>(sets.bt.B);
  const size_t stat_at = plan.reserve<float2>(T * Hs);
  const bwd::ItemScratch items_at(plan, raw_entries(sets), P * m.Hb, S, P * chunks);  // a flag per page chunk
  char* ws = plan.allocate(st);

  auto* si = reinterpret_cast<SeqInfo*>(ws + si_at);
  m.sets.si = si;
  m.q = a.q.data<char>();
  m.kc = a.k_cache.data<char>();
  m.qi = a.qi.data<char>();
  m.ki = a.ki_cache.data<char>();
  m.lse = a.lse.data<float>();
  m.dkl = a.dkl.present() ? a.dkl.data<float>() : nullptr;
  m.Hq = static_cast<int>(Hq);
  m.Hkv = static_cast<int>(Hkv);
  m.G = static_cast<int>(G);
  m.lg2G = log2_of(m.G);
  m.D = static_cast<int>(D);
  m.Hs = static_cast<int>(Hs);
  m.Di = static_cast<int>(Di);
  m.shared = shared;
  m.scale = a.scale;
  m.scale_log2 = a.scale * kLog2e;
  m.scale_i = a.scale_i;
  m.inv_nh = 1.0f / static_cast<float>(shared ? Hq : G);  // exact: a power of two
  m.kl = a.kl.data<float>();
  m.dqi = a.dqi.data<float>();
  m.dki = a.dki_cache.data<float>();
  m.stat = reinterpret_cast<float2*>(ws + stat_at);
  m.S = static_cast<int>(S);
  m.chunks = static_cast<int>(chunks);
  m.tpi = static_cast<int>(items.tpi);
  // a page's first list is written even when nothing attended the page
  bwd::build_items(st, m, items_at, ws, si, sparse, bwd::list_items_kernel<bwd::EmptyLists::first_head>, m.Hs,
                   P * chunks);

  if (DP == 64)
    launch_all<kBF16, 64>(st, m, T, P);
  else
    launch_all<kBF16, 128>(st, m, T, P);
}

}  // namespace msa::cuda
