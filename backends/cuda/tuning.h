// The GPU backend's kernel-choice settings (hal/tuning.h), one per device, read from the
// environment when the device opens and shared by all its streams. Each op's chooser reads
// them next to the arguments and the device's properties. docs/tuning.md describes every
// knob; no knob changes what an op computes.
#pragma once
#include <array>
#include <span>

#include "backends/cuda/gpu_ns.h"
#include "hal/tuning.h"

namespace msa::MSA_GPU_NS {

struct Tuning {
  // User-facing switches (environment variables).
#if defined(MSA_VENDOR_HIP) || defined(__HIP_PLATFORM_AMD__)
  int tier = 0;  // HIP builds the portable tier only
#else
  int tier = 1;  // MSA_CUDA_TIER: 0 portable (the kernels HIP compiles), 1 native
#endif
  int decode = 2;         // MSA_CUDA_DECODE: 0 off, 1 split-KV mma.sync only, 2 + the sm_90 cluster kernel
  int flash = 2;          // MSA_CUDA_FLASH: 0 off (wmma kernels), 1 FlashAttention-2-style only, 2 + wgmma
  int flash_sparse = -1;  // MSA_CUDA_FLASH_SPARSE: -1 by Qb, 0 never, 1 always (the union walk)
  int kv_outer = -1;      // MSA_CUDA_KV_OUTER: token-level sparse prefill KV-block-outer: -1 chosen, 0 never, 1 always
  int flash_union_pct =
      40;           // MSA_CUDA_FLASH_UNION_PCT: kv_outer -1 takes the union walk up to this mean union (% of tpc x k)
  int indexer = 2;  // MSA_CUDA_INDEXER: 0 portable, 1 mma.sync, 2 + the sm_90 wgmma prefill kernel
  int fused_topk = 1;     // MSA_CUDA_FUSED_TOPK: indexer_topk's select fused into the decode indexer
  int training_mma = 1;   // MSA_CUDA_TRAINING_MMA: the backward and indexer_kl tensor-core tiers
  int topk_register = 1;  // MSA_TOPK_REGISTER: block_topk's register paths (split rows, one-block rows)
  // Test hooks (hal::Device::set_tuning, `msa check --tuning`): force a geometry the
  // choosers would not pick on small cases.
  int flash_splits = 0;     // n KV splits of the flash prefill kernels (0: chosen)
  int cluster_merge = 0;    // cluster decode merge: 0 chosen, 1 through global memory always
  int pdl = 1;              // programmatic dependent launch of the decode kernels
  int bwd_item_tokens = 0;  // tokens per dK/dV work item of the tensor-core backward (0: chosen)
  int kl_item_tokens = 0;   // tokens per dki work item of the tensor-core indexer_kl (0: chosen)
  int indexer_groups = 1;   // decode indexer: 1 a sequence's tokens share one key read, 0 one token per block

  bool native() const { return tier != 0; }
};

inline constexpr const char* kTierNames[] = {"portable", "native"};

#if defined(MSA_VENDOR_HIP) || defined(__HIP_PLATFORM_AMD__)
// HIP builds the portable tier only: block_topk's paths are its one choice.
inline constexpr std::array<hal::Knob<Tuning>, 1> kTuningKnobs{{
    {"topk_register", "MSA_TOPK_REGISTER", &Tuning::topk_register, 1, 0, 1,
     "0: block_topk on the shared-memory histogram row kernel only"},
}};
#else
inline constexpr std::array<hal::Knob<Tuning>, 16> kTuningKnobs{{
    {"tier", "MSA_CUDA_TIER", &Tuning::tier, 1, 0, 1,
     "portable: only the kernels HIP compiles (no wmma, mma.sync, wgmma, TMA, cuBLAS)", kTierNames},
    {"decode", "MSA_CUDA_DECODE", &Tuning::decode, 2, 0, 2,
     "0: no decode kernels; 1: split-KV mma.sync only; 2: + the cluster kernel"},
    {"flash", "MSA_CUDA_FLASH", &Tuning::flash, 2, 0, 2, "0: prefill on wmma; 1: FlashAttention-2-style; 2: + wgmma"},
    {"flash_sparse", "MSA_CUDA_FLASH_SPARSE", &Tuning::flash_sparse, -1, -1, 1,
     "sparse prefill on the flash kernel: -1 by Qb, 0 never, 1 always"},
    {"kv_outer", "MSA_CUDA_KV_OUTER", &Tuning::kv_outer, -1, -1, 1,
     "token-level sparse prefill on the KV-block-outer kernel: -1 chosen, 0 never, 1 where it applies"},
    {"flash_union_pct", "MSA_CUDA_FLASH_UNION_PCT", &Tuning::flash_union_pct, 40, 0, 100,
     "kv_outer -1: the flash union walk when a flash block's selections overlap to at most this % of tpc x k"},
    {"indexer", "MSA_CUDA_INDEXER", &Tuning::indexer, 2, 0, 2,
     "0: portable indexer_score; 1: mma.sync; 2: + wgmma prefill"},
    {"fused_topk", "MSA_CUDA_FUSED_TOPK", &Tuning::fused_topk, 1, 0, 1,
     "0: indexer_topk as indexer_score then block_topk"},
    {"training_mma", "MSA_CUDA_TRAINING_MMA", &Tuning::training_mma, 1, 0, 1,
     "0: backward and indexer_kl on the portable tiles"},
    {"topk_register", "MSA_TOPK_REGISTER", &Tuning::topk_register, 1, 0, 1,
     "0: block_topk on the shared-memory histogram row kernel only"},
    {"flash_splits", nullptr, &Tuning::flash_splits, 0, 0, 64, "force n KV splits in the flash prefill kernels"},
    {"cluster_merge", nullptr, &Tuning::cluster_merge, 0, 0, 1, "1: cluster decode ranks merge in global memory"},
    {"pdl", nullptr, &Tuning::pdl, 1, 0, 1, "0: no programmatic dependent launch for decode"},
    {"bwd_item_tokens", nullptr, &Tuning::bwd_item_tokens, 0, 0, 1023,
     "force n tokens per dK/dV item (tensor-core backward)"},
    {"kl_item_tokens", nullptr, &Tuning::kl_item_tokens, 0, 0, 1023,
     "force n tokens per dki item (tensor-core indexer_kl)"},
    {"indexer_groups", nullptr, &Tuning::indexer_groups, 1, 0, 1,
     "0: the decode indexer reads the keys once per token (<= 64 tokens)"},
}};
#endif

inline std::span<const hal::Knob<Tuning>> tuning_knobs() { return kTuningKnobs; }

// The defaults and the environment, read once: the settings of a stream made without a
// device (tests); a device reads its own when it opens.
inline const Tuning& default_tuning() {
  static const Tuning t = hal::tuning_from_env(tuning_knobs());
  return t;
}

}  // namespace msa::MSA_GPU_NS
