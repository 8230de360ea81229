// The work plan of indexer_score, built on the host side without SIMD types.
//
// A group is a run of consecutive query blocks of one sequence (at most kIdxGroupRows
// rows of tokens x Hi indexer heads, or one whole query block when Qb is larger); all
// its rows share the one indexer key head, so each key block is converted once per task
// and scored against every row. Tasks are (group, chunk of kIdxChunkBlocks key blocks):
// each writes its own block_score entries, so nothing is merged across tasks.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/varlen.h"
#include "hal/dtype.h"

namespace msa::cpu {

inline constexpr int64_t kIdxGroupRows = 128;
inline constexpr int64_t kIdxChunkBlocks = 16;
// Groups of at most this many rows (decode) use the dot-product kernel.
inline constexpr int64_t kIdxDotRows = 8;

struct IndexerPlan {
  struct Group {
    int64_t seq = 0;
    int64_t qb_begin = 0, qb_end = 0;  // query blocks [qb_begin, qb_end)
    int64_t t_begin = 0, t_end = 0;    // their packed tokens
    int64_t n_blocks = 0;              // key blocks scored: floor(last pos / Bs) + 1
    int64_t n_chunks = 0;
  };
  struct Task {
    int64_t group = 0;
    int64_t chunk = 0;
  };

  hal::DType q_dtype = hal::DType::f32;
  hal::DType k_dtype = hal::DType::bf16;
  const void* qi = nullptr;
  const void* ki = nullptr;
  const float* ki_scale = nullptr;          // fp8 keys: per-token f32 scales [P][Bs], null = 1
  const uint8_t* ki_group_scale = nullptr;  // NVFP4 keys: e4m3 scales [P][Bs][Di/16]
  const int32_t* block_table = nullptr;
  float* score = nullptr;  // [NQ][Hi][max_blocks]
  int64_t max_blocks = 0, Hi = 0, Di = 0, Bs = 0;
  float scale = 1.0f;
  bool pool_lse = false;
  Batch batch;
  std::vector<Group> groups;
  std::vector<Task> tasks;
};

}  // namespace msa::cpu
