// Internal helpers of the attention cases (not part of the case library's interface).
#pragma once
#include <string>
#include <vector>

#include "check/attention_cases.h"
#include "check/batch.h"
#include "check/case.h"

namespace msa::cases::detail {

// A random input slot; in perf mode large tensors are tiled.
Slot random_input(std::string name, hal::DType dtype, std::vector<int64_t> shape, Rng& rng, double sigma, bool perf);

// [T][H][D] queries drawn as a slow random walk over tokens (x_t = a x_{t-1} +
// sqrt(1-a^2) n_t per sequence), so adjacent tokens select mostly the same blocks.
Slot random_walk_input(std::string name, hal::DType dtype, const Batch& batch, int H, int D, Rng& rng, double sigma,
                       double a);

// Adds strength * (one random vector per run of Bs rows) to the rows (last dim) of a
// slot's contents: keys with block-level structure, so block scores are stable across
// similar queries as in real models.
void add_block_structure(Slot& s, int Bs, Rng& rng, double strength);

// A paged cache slot (see make_cache).
Slot cache_input(std::string name, const Batch& batch, const Pages& pages, int heads, int D, hal::DType dtype, Rng& rng,
                 double sigma, bool perf);

// Appends the block_table, kv_len and cu_q slots.
void push_index_slots(CaseData& d, const Batch& batch, const Pages& pages);

// Appends the attention outputs `out` [T][Hq][D] (p.dtype) and `lse` [T][Hq] f32 with the
// contract's bounds.
void push_out_lse(CaseData& d, const AttnParams& p, const Batch& batch);

// The inputs of an attention case over paged caches for `seed`: q, k_cache, v_cache,
// block_table, kv_len, cu_q and, with `sparse`, block_idx (p's selections: -1 padding,
// p.oob_idx, p.empty_sel), with the pages they use.
struct PagedInputs {
  CaseData data;
  Pages pages;
};
PagedInputs paged_attention_inputs(const AttnParams& p, const Batch& batch, uint64_t seed, bool perf, bool sparse);

// The fp8 per-token key scale [P][Bs] in [0.5, 2) (NaN in slack slots in check mode).
Slot ki_scale_input(const Batch& batch, const Pages& pages, Rng& rng, bool perf);

// The ki_cache and ki_scale slots of `p`'s indexer keys: bf16 / f32 / fp8 (with the
// optional per-token scale), or NVFP4 (Di/2 random code bytes per token and the [P][Bs][Di/16]
// e4m3 group scales, NaN in slack slots in check mode). `add_structure` adds block-level
// structure (add_block_structure) to float keys.
void push_indexer_key_slots(CaseData& d, const AttnParams& p, const Batch& batch, const Pages& pages, Rng& rng,
                            bool perf, bool add_structure = false);

// NVFP4 group scales [P][Bs][Di/16] e4m3: 2^[-4, 2) rounded, NaN in slack slots in check mode.
Slot nvfp4_scale_input(const Batch& batch, const Pages& pages, int Di, Rng& rng, bool perf);

// Bytes per token of p's indexer keys (codes and scales).
double indexer_key_bytes(const AttnParams& p);

// Bytes of the valid cache tokens of every sequence for `row_bytes` per token.
double valid_token_bytes(const Batch& batch, double row_bytes);

// Seeds for the independent random streams of one case.
inline uint64_t stream_seed(uint64_t seed, uint64_t stream) { return mix_seed(seed, stream); }

// "16 x 1..9" style summary of the maximum blocks of a batch.
int64_t max_blocks_of(const Batch& batch, int Bs);

}  // namespace msa::cases::detail
