// The Vulkan backend's kernel-choice settings (hal/tuning.h), one per device. They are
// test hooks and A/B settings (no environment variable; hal::Device::set_tuning, `msa
// check --tuning`): the address path on small tensors and the decode kernels' split
// geometry. MSA_VK_BDA, read when the device is created, is not one of them: it decides
// which device features are enabled.
#pragma once
#include <array>
#include <span>

#include "hal/tuning.h"

namespace msa::vulkan {

struct Tuning {
  int force_bda = 0;            // kernels with an address variant take every tensor by address
  int gqa_units = 2;            // tiles per split of the GQA decode attention
  int gqa_groups = 8192;        // splits only grow the grid up to this many workgroups
  int gqa_dense = 1;            // dense_attention takes the GQA kernel where it suits (0: paged_attention.comp)
  int gqa_dense_groups = 2048;  // as gqa_groups, for dense_attention
  int indexer_bpw = 0;          // KV blocks per workgroup of the streaming indexer (0: chosen)
};

inline constexpr std::array<hal::Knob<Tuning>, 6> kTuningKnobs{{
    {"force_bda", nullptr, &Tuning::force_bda, 0, 0, 1,
     "1: decode sparse attention, kv_append and the streaming indexer_score take their tensors by device address "
     "even when they fit a binding"},
    {"gqa_units", nullptr, &Tuning::gqa_units, 2, 1, 1 << 20, "tiles per split of the GQA decode attention"},
    {"gqa_groups", nullptr, &Tuning::gqa_groups, 8192, 1, 1 << 30, "the largest grid the GQA kernel splits up to"},
    {"gqa_dense", nullptr, &Tuning::gqa_dense, 1, 0, 1,
     "1: dense_attention takes the GQA kernel where the shape and device suit it; 0: paged_attention.comp"},
    {"gqa_dense_groups", nullptr, &Tuning::gqa_dense_groups, 2048, 1, 1 << 30,
     "the largest grid the GQA kernel splits dense_attention up to"},
    {"indexer_bpw", nullptr, &Tuning::indexer_bpw, 0, 0, 16,
     "KV blocks per workgroup of the streaming indexer (0: chosen)"},
}};

inline std::span<const hal::Knob<Tuning>> tuning_knobs() { return kTuningKnobs; }

}  // namespace msa::vulkan
