// The work plan of a paged attention call (dense_attention, sparse_block_attention),
// built on the host side without SIMD types and run by the per-target kernels.
//
// A group is the rows (tokens x the G query heads of one KV head) that share one key
// list: a tile of tokens of one sequence (dense) or of one query block (sparse). Groups
// with few rows and long key lists (decode) are split over their key list at fixed
// boundaries (kChunk entries); the partial results (unnormalised output, max, sum) are
// merged per row in chunk order. The split depends only on the shapes, so the result
// is bitwise the same for any thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/varlen.h"
#include "hal/dtype.h"
#include "hal/tensor.h"

namespace msa::cpu {

struct PagedAttnPlan {
  struct Group {
    int64_t seq = 0;      // sequence b
    int64_t kv_head = 0;  // KV head; its query heads are kv_head*G .. +G-1
    int64_t t_begin = 0;  // packed tokens [t_begin, t_end)
    int64_t t_end = 0;
    const int32_t* list = nullptr;  // sparse: the block_idx row (n_list entries); dense: null = 0..n_list-1
    int64_t n_list = 0;
    int64_t list_off = -1;  // >= 0: `list` is p.lists.data() + list_off (merged groups)
    int64_t sel_off = -1;   // >= 0: merged query blocks; p.sel[sel_off + e*ntok + i] says
                            // whether token i selected list entry e (else it is masked)
    int64_t n_chunks = 1;   // > 1: split over the key list
    int64_t task0 = 0;      // index of its first task
    int64_t part_off = 0;   // offset of its partial results in `partial` (floats)
  };
  struct Task {
    int64_t group = 0;
    int64_t chunk = 0;
  };

  // Inputs and outputs (element pointers; dtype applies to q, k/v caches and out).
  hal::DType dtype = hal::DType::f32;
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* block_table = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  int64_t max_blocks = 0, Hq = 0, Hkv = 0, G = 0, D = 0, Bs = 0;
  float scale = 1.0f;
  Batch batch;

  std::vector<Group> groups;
  std::vector<Task> tasks;
  std::vector<int32_t> lists;          // owned key lists of merged groups (Group::list points here)
  std::vector<uint8_t> sel;            // token-selects-entry flags of merged groups
  int64_t chunk = 0;                   // key list entries per chunk of a split group
  mutable std::vector<float> partial;  // per split task: o [D][rpad], m [rpad], l [rpad]

  // Floats of one partial slot for a group of `rows` rows.
  int64_t slot_floats(int64_t rows) const { return pad_rows(rows) * (D + 2); }
  // Rows rounded up to whole vectors of the widest target (16 f32 lanes).
  static int64_t pad_rows(int64_t rows) { return (rows + 15) / 16 * 16; }
};

// Small query blocks (Qb = 1 prefill) of one sequence are merged into one group when
// their selections overlap enough: the group runs the union of their lists, each row
// masked to its own blocks, so each converted block serves several tokens. Merging
// stops when (union size x rows) exceeds this factor times the separate work.
inline constexpr double kMergeSlack = 1.5;

// A call with fewer groups than this splits each group over its key list.
inline constexpr int64_t kSplitBelowGroups = 64;
// Rows (tokens x G) per group at most; at least one token.
inline constexpr int64_t kGroupRows = 128;

}  // namespace msa::cpu

namespace msa::cpu {
// Key list entries (blocks) per chunk of a split group.
inline constexpr int64_t kDenseChunkBlocks = 8;
inline constexpr int64_t kSparseChunkBlocks = 4;
// Chunks per split group at most (larger chunks at long contexts).
inline constexpr int64_t kMaxChunks = 128;

// Building and running a plan (paged_attention.cpp).
// Fills the shared part of the plan from the common arguments and validates index data.
void init_plan(PagedAttnPlan& p, const char* op, const hal::Tensor& q, const hal::Tensor& k_cache,
               const hal::Tensor& v_cache, const hal::Tensor& block_table, const hal::Tensor& kv_len,
               const hal::Tensor& cu_q, int64_t Qb, float scale, const hal::Tensor& out, const hal::Tensor& lse);
// Appends a group of tokens [t0, t1) of sequence `seq` and KV head `hk` over `list`
// (null: blocks 0 .. n_list-1).
void add_group(PagedAttnPlan& p, int64_t seq, int64_t hk, int64_t t0, int64_t t1, const int32_t* list, int64_t n_list);
// Splits groups when there are few, numbers the tasks, sizes the partial workspace.
void finish_plan(PagedAttnPlan& p, int64_t chunk);
// Tokens per group for G query heads per KV head (kGroupRows rows, at least one token).
int64_t tokens_per_group(int64_t G);
// Runs the plan on the best SIMD target.
void run_paged_plan(const PagedAttnPlan& p);
}  // namespace msa::cpu
