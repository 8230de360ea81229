// indexer_kl: KL(target || student) per (token, selection head) and its gradients dqi,
// dki_cache in f32, deterministic (every sum in an order fixed by the inputs, no float
// atomics), in the passes of the cpu backend (backends/cpu/indexer_kl.cpp) on
// shared-memory tiles (indexer_kl_tiles.cuh):
//  1. kl_target_kernel / kl_logit_kernel, CTAs per (page, [selection head,] kKeysT key
//     slots): the page's keys stay in shared memory while tiles of kRowsT query rows of
//     the (token, selection head) entries that attended it, from the inverse index
//     (training_index.cuh), stream past: the target p (the mean over the group's heads
//     of exp(scale q.k - lse)) and the logits scale_i qi.ki, each product formed once,
//     stored per (row, selection entry, slot);
//  2. kl_rows_kernel, one CTA per (token, selection head): the student's softmax, kl and
//     the logit gradient dkl * scale_i * (u - p) of each slot, in place of p;
//  3. kl_grads_kernel, CTAs per (page, key slots, kl_dims dims of Di): dki_cache = sum
//     over the page's rows (index order) of the gradient times qi, and per row the
//     chunk's share of dqi (gradient times ki), stored;
//  4. kl_dqi_kernel: dqi = the shares of each row's blocks in block_idx order.
// A bucket's tiles are split over several CTAs (kl_splits; the dki_cache sums of 3 merged
// in split order). The per-slot buffers take a pass of tokens at a time (pass_bytes);
// later passes add to dki_cache. The token sets and their device checks are those of the
// forward attention ops.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/kernels/portable/entries.h"
#include "backends/cuda/kernels/portable/indexer_kl_sets.cuh"
#include "backends/cuda/kernels/portable/indexer_kl_tiles.cuh"
#include "backends/cuda/kernels/portable/launch.cuh"

namespace msa::MSA_GPU_NS {
namespace {

// Scratch of one pass (the target / gradient and logit buffers and the dqi shares): a
// 64th of the device's memory (1 GiB where it is not known).
int64_t pass_bytes(const Stream& st) {
  const size_t mem = st.props().memory_bytes;
  return mem > 0 ? static_cast<int64_t>(mem / 64) : int64_t{1} << 30;
}

}  // namespace

void indexer_kl_portable(hal::Stream& s, const ops::IndexerKlArgs& a) {
  auto& st = gpu_stream(s);
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  const int64_t P = a.k_cache.dim(0), Hkv = a.k_cache.dim(1), Bs = a.k_cache.dim(2);
  const int64_t Hs = a.qi.dim(1), Di = a.qi.dim(2);
  const bool sparse = a.stage == ops::KlStage::sparse;
  KlParams p;
  p.sets = kl_attend_sets(st, a);
  p.qi = a.qi.data<void>();
  p.ki = a.ki_cache.data<void>();
  p.q = a.q.data<void>();
  p.kc = a.k_cache.data<void>();
  p.lse = a.lse.data<float>();
  p.dkl = a.dkl.present() ? a.dkl.data<float>() : nullptr;
  p.qi_dt = dt_code(a.qi.dtype);
  p.q_dt = dt_code(a.q.dtype);
  p.Hq = static_cast<int>(Hq);
  p.Hkv = static_cast<int>(Hkv);
  p.G = p.Hq / p.Hkv;
  p.D = static_cast<int>(D);
  p.Hs = static_cast<int>(Hs);
  p.Di = static_cast<int>(Di);
  p.shared = a.mode == ops::SelectionMode::shared;
  p.scale = a.scale;
  p.scale_i = a.scale_i;
  p.kl = a.kl.data<float>();
  p.dqi = a.dqi.data<float>();
  p.dki = a.dki_cache.data<float>();
  p.Hb = sparse ? p.sets.Hs : 1;
  p.nsel = sparse ? p.sets.k : p.sets.bt.max_blocks;
  p.chunks = static_cast<int>((Bs + kKeysT - 1) / kKeysT);
  p.dchunks = static_cast<int>((Di + kl_dims(Di) - 1) / kl_dims(Di));
  // Tiles of the call, roughly: (token row, block) pairs (dense: half the blocks on
  // average) per key chunk, kRowsT rows a tile (the target: its token rows a tile).
  const int64_t pairs = T * Hs * p.nsel / (sparse ? 1 : 2) * p.chunks;
  const int64_t G = Hq / std::max<int64_t>(Hkv, 1);
  p.splits_t = kl_splits(P * Hs * p.chunks, pairs / std::max<int64_t>(1, kRowsT / G), 32);
  p.splits_l = kl_splits(P * p.chunks, pairs / kRowsT, 32);
  p.splits_g = kl_splits(P * p.chunks * p.dchunks, pairs * p.dchunks / kRowsT, 8);
  p.plane = P * Bs * Di;

  // Tokens per pass: as many as the pass scratch holds, at least one.
  const int64_t slots = int64_t{p.nsel} * Bs, shares = int64_t{p.nsel} * p.chunks * Di;
  const int64_t token_bytes = Hs * (2 * slots + shares) * static_cast<int64_t>(sizeof(float));
  const int64_t per_pass =
      std::clamp<int64_t>(pass_bytes(st) / std::max<int64_t>(token_bytes, 1), 1, std::max<int64_t>(T, 1));
  const int64_t pass_rows = std::min(per_pass, T) * Hs;
  ScratchPlan plan;
  const size_t si_at = plan.reserve<SeqInfo>(p.sets.bt.B);
  const IndexPlan ip(plan, raw_entries(p.sets), P * p.Hb);
  const size_t target_at = plan.reserve<float>(pass_rows * slots);
  const size_t logit_at = plan.reserve<float>(pass_rows * slots);
  const size_t share_at = plan.reserve<float>(pass_rows * shares);
  const size_t part_at = plan.reserve<float>(p.splits_g > 1 ? p.splits_g * p.plane : 0);
  char* ws = plan.allocate(st);
  p.sets.si = reinterpret_cast<SeqInfo*>(ws + si_at);
  p.target = reinterpret_cast<float*>(ws + target_at);
  p.logit = reinterpret_cast<float*>(ws + logit_at);
  p.dpart = reinterpret_cast<float*>(ws + share_at);
  p.part = reinterpret_cast<float*>(ws + part_at);
  launch_seq_info(st, p.sets, sparse, reinterpret_cast<SeqInfo*>(ws + si_at));
  p.inv = build_inverse(st, p.sets, p.Hb, ip, ws);

  constexpr int kRowThreads = 128;
  const auto run = [&](auto dt, auto kt) {
    constexpr int DT = decltype(dt)::value, KT = decltype(kt)::value;
    for (int64_t t_lo = 0; t_lo == 0 || t_lo < T; t_lo += per_pass) {
      p.t_lo = static_cast<int>(t_lo);
      p.t_hi = static_cast<int>(std::min(T, t_lo + per_pass));
      p.first = t_lo == 0;
      const int64_t rows = int64_t{p.t_hi - p.t_lo} * Hs;
      if (P > 0 && Bs > 0 && rows > 0) {
        MSA_DISPATCH_TILE_DP(D, DP, {
          const int smem = kl_tiles_smem<kl_target_kernel<DT, DP>, KlTiles<DP>>(st);
          kl_target_kernel<DT, DP>
              <<<static_cast<unsigned>(P * Hs * p.chunks * p.splits_t), kTileThreads, smem, st.native()>>>(p);
          MSA_CUDA_CHECK_LAUNCH();
        });
        MSA_DISPATCH_TILE_DP(Di, DPI, {
          const int smem = kl_tiles_smem<kl_logit_kernel<KT, DPI>, KlTiles<DPI>>(st);
          kl_logit_kernel<KT, DPI>
              <<<static_cast<unsigned>(P * p.chunks * p.splits_l), kTileThreads, smem, st.native()>>>(p);
          MSA_CUDA_CHECK_LAUNCH();
        });
      }
      if (rows > 0) {
        kl_rows_kernel<kRowThreads><<<static_cast<unsigned>(rows), kRowThreads, 0, st.native()>>>(p);
        MSA_CUDA_CHECK_LAUNCH();
      }
      if (P > 0 && Bs > 0) {
        const auto grads = [&](auto kd) {
          constexpr int KD = decltype(kd)::value;
          const int smem = kl_tiles_smem<kl_grads_kernel<KT, KD>, GradTiles<KD>>(st);
          kl_grads_kernel<KT, KD>
              <<<static_cast<unsigned>(P * p.chunks * p.dchunks * p.splits_g), kTileThreads, smem, st.native()>>>(p);
          MSA_CUDA_CHECK_LAUNCH();
        };
        if (kl_dims(Di) == 32)
          grads(std::integral_constant<int, 32>{});
        else
          grads(std::integral_constant<int, 64>{});
        if (p.splits_g > 1) {
          kl_dki_merge_kernel<kRowThreads>
              <<<grid_for(p.plane, kRowThreads, st.props()), kRowThreads, 0, st.native()>>>(p);
          MSA_CUDA_CHECK_LAUNCH();
        }
      }
      if (rows > 0) {
        kl_dqi_kernel<kRowThreads><<<static_cast<unsigned>(rows), kRowThreads, 0, st.native()>>>(p);
        MSA_CUDA_CHECK_LAUNCH();
      }
    }
  };
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    if (a.ki_cache.dtype == hal::DType::f32)
      run(std::integral_constant<int, DT>{}, std::integral_constant<int, kF32>{});
    else
      run(std::integral_constant<int, DT>{}, std::integral_constant<int, kBF16>{});
  });
}

}  // namespace msa::MSA_GPU_NS
