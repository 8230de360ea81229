// The inverse index behind the training kernels' deterministic gradient sums, built on
// the device per call (shaders/block_inverse.*.comp). Its entries are the call's
// selection: one per block_idx entry of a query block (sparse) or per logical block of a
// sequence (dense), entry e of row r at r * per_row + i. Each entry goes to a bucket (its
// page, or its page and selection head), and each bucket lists its entries ascending, so
// a slab kernel that owns one bucket's gradient (shaders/slab_walk.glsl) sums over them
// in an order fixed by the inputs: no float atomics. Four dispatches: count (each row's
// tokens, each entry's bucket, integer counts per bucket), scan (bucket starts), fill
// (entries into their bucket's range by integer atomics), sort (each range ascending, so
// the result does not depend on the order of those atomics).
//
// Everything lives in one workspace binding of 32-bit words: rows [R][4] (first token,
// first position, tokens, kv_len), bucket [E], count [NB], begin [NB + 1], entry [E],
// then `extra` words the op's other passes share (e.g. each row's delta).
#pragma once
#include <cstdint>
#include <string>

#include "backends/vulkan/device.h"
#include "hal/op_id.h"
#include "hal/stream.h"

namespace msa::vulkan {

// The call's paged selection (block_idx absent: dense).
struct PagedSelection {
  hal::Tensor block_table, kv_len, cu_q, block_idx;
  uint32_t T = 0, P = 0, Bs = 0, max_blocks = 0, B = 0, Qb = 1, NQ = 0;
  uint32_t Hs = 1, K = 0;     // block_idx [NQ][Hs][K] (sparse)
  bool head_buckets = false;  // bucket = page * Hs + selection head, else the page

  bool sparse() const { return block_idx.present(); }
  uint64_t rows() const { return sparse() ? NQ : B; }
  uint64_t per_row() const { return sparse() ? uint64_t{Hs} * K : max_blocks; }
  uint64_t entries() const { return rows() * per_row(); }
  uint64_t buckets() const { return head_buckets ? uint64_t{P} * Hs : P; }
};

// Word offsets of the workspace's parts, and its size.
struct BlockInverse {
  Allocation* ws = nullptr;
  uint64_t bytes = 0;
  uint32_t rows = 0, bucket = 0, count = 0, begin = 0, entry = 0, extra = 0;
};

// The layout for `sel` plus `extra_words` (no allocation).
BlockInverse block_inverse_layout(const PagedSelection& sel, uint64_t extra_words);

// "" when the workspace of `sel` plus `extra_words` fits one storage-buffer binding of
// `dev` and 32-bit word indices, else why not (for the supports() predicates).
std::string block_inverse_unsupported(const VulkanDevice& dev, const PagedSelection& sel, uint64_t extra_words);

// Records the four dispatches on `s` (error word of `op`; they raise no flags: the op's
// per-row pass validates the index data) and returns the workspace they filled.
BlockInverse build_block_inverse(hal::Stream& s, hal::OpId op, const PagedSelection& sel, uint64_t extra_words);

}  // namespace msa::vulkan
