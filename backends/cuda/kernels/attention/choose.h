// The kernel choosers of the forward attention ops (sparse_block_attention,
// dense_attention, patch_attention_3d) on the CUDA backend: each reads one call's shape,
// the device's properties and the device's Tuning and names the kernel that runs it; the
// op's entry (<op>/entry.cu) switches over the answer. Host-only and free of the CUDA
// runtime, so the routing is tested without a GPU (tests/cuda_choose). The launch
// geometry the choice depends on (split counts, grid sizes) is computed here too, once,
// and the launchers ask the same functions.
#pragma once
#include <cstdint>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "hal/dtype.h"

namespace msa::MSA_GPU_NS {

// One attention call as the choosers see it (bound once by the op's entry).
struct AttnCall {
  hal::DType dtype = hal::DType::f32;
  int64_t T = 0;  // query tokens (patch_attention_3d: patches N)
  int Hq = 1, Hkv = 1, G = 1, D = 0;
  int B = 0, max_blocks = 0, Bs = 1;  // paged ops: sequences, block-table columns, KV block size
  int64_t NQ = 0;                     // sparse: query blocks
  int Qb = 1, k = 0, Hs = 1;          // sparse: query block size, selected blocks, selection heads
  bool aligned16 = true;              // q, the K/V tensors and out start on 16-byte boundaries
  int counter_slot = -1;              // the stream's counter slot (-1: none)
  int64_t pages = 0;                  // paged ops: cache pages
};

enum class SparseAttentionKernel {
  decode_cluster,  // sm_90 thread-block clusters, the M3 decode shape (sparse_block_attention/decode_cluster.cu)
  decode_split,    // split-KV mma.sync decode (attention/decode_split.cu)
  by_union,        // kv_outer or flash, from the selection's union size per flash block (kv_outer.cu)
  kv_outer,        // KV-block-outer prefill, token-level selection (sparse_block_attention/kv_outer.cu)
  flash,           // FlashAttention-2-style prefill over the selections' union (attention/flash_prefill.cu)
  wmma,            // the shared-core kernel on wmma tensor cores (attention/wmma.cu)
  portable,        // the shared-core kernel on FMA (portable/sparse_block_attention.cu)
};
enum class DenseAttentionKernel {
  decode_split,  // split-KV mma.sync decode (attention/decode_split.cu)
  flash_wgmma,   // sm_90a warpgroup-MMA prefill (dense_attention/flash_wgmma.cu)
  flash,         // FlashAttention-2-style prefill (attention/flash_prefill.cu)
  wmma,          // the shared-core kernel on wmma tensor cores (attention/wmma.cu)
  portable,      // the shared-core kernel on FMA (portable/dense_attention.cu)
};
enum class PatchAttentionKernel {
  flash,     // FlashAttention-2-style, 128-token chunks (attention/flash_prefill.cu)
  wmma,      // the shared-core kernel on wmma tensor cores (attention/wmma.cu)
  portable,  // the shared-core kernel on FMA (portable/patch_attention_3d.cu)
};

const char* kernel_name(SparseAttentionKernel k);
const char* kernel_name(DenseAttentionKernel k);
const char* kernel_name(PatchAttentionKernel k);

SparseAttentionKernel choose_sparse_attention(const AttnCall& c, const DeviceProps& pr, const Tuning& t);
// by_union, once the selection is known: the flash kernel's union walk when its blocks'
// unions (distinct selected blocks of tpc consecutive tokens and a selection head; `sum`
// over `blocks` of them) average at most t.flash_union_pct percent of tpc x k, else kv_outer.
SparseAttentionKernel choose_by_union(int64_t sum, int64_t blocks, int tpc, int k, const Tuning& t);
DenseAttentionKernel choose_dense_attention(const AttnCall& c, const DeviceProps& pr, const Tuning& t);
PatchAttentionKernel choose_patch_attention(const AttnCall& c, const DeviceProps& pr, const Tuning& t);

// ---- geometry shared by the choosers and the launchers ----------------------------------
namespace attn_geom {

// Shared-core kernels (portable/, attention/wmma.cu): rows per thread block.
inline constexpr int kRows = 16;

// Split-KV decode (attention/decode_split.cu).
inline constexpr int kDecMaxT = 512;         // more query tokens (prefill) take the other kernels,
inline constexpr int kDecMaxMeanQlen = 16;   // except sparse Qb = 1 calls of <= 16 tokens per sequence
inline constexpr int kDecMaxK = 128;         // selected blocks: one thread each
inline constexpr int kDecBK = 64;            // keys per tile
inline constexpr int kDecMaxSplits = 64;     // partials the merging block combines
inline constexpr int kDecCtasPerSm = 2;      // the split count targets one wave of 2 blocks per SM
inline constexpr int kDecCtrSlots = 8;       // streams with split-KV arrival counters
inline constexpr int kDecCtrPerSlot = 4096;  // groups per launch with counters

// Cluster decode (sparse_block_attention/decode_cluster.cu): the M3 shape only.
inline constexpr int kClD = 128, kClBs = 128, kClGroup = 16, kClMaxE = 128, kClMaxC = 16;

// FlashAttention-2-style prefill (attention/flash_prefill.cu).
inline constexpr int kFaRows = 128;     // query rows per block
inline constexpr int kFaBK = 64;        // keys per tile
inline constexpr int kFaMaxSel = 1024;  // sparse: (local query block, entry) pairs per block
inline constexpr int kFaMaxQl = 32;     // sparse: local query blocks per block (mask bits)
inline constexpr int kFaMaxSplits = 64;

// KV-block-outer sparse prefill (sparse_block_attention/kv_outer.cu).
inline constexpr int kKvoMaxBs = 128;                          // keys a slab holds in shared memory
inline constexpr int kKvoMaxG = 128;                           // query rows per item
inline constexpr int64_t kKvoPartialBytes = int64_t{1} << 30;  // partial outputs per token group
// Tokens per group: the most whose partial outputs (Hq x k per token, D values of 2 bytes
// each) fit kKvoPartialBytes; their f32 lse (1/64 of that at D = 128) comes on top, so
// a power-of-two chunk splits into power-of-two groups (8K tokens at M3's shape: 2 x 4096).
int64_t kv_outer_group_tokens(int Hq, int k, int D);

// Warpgroup-MMA dense prefill (dense_attention/flash_wgmma.cu).
inline constexpr int kWgRows = 128, kWgBK = 128, kWgD = 128, kWgMaxSplits = 64;

// Sparse: tokens per row chunk and row chunks per query block of the shared-core and
// decode kernels.
int sparse_tpc(const AttnCall& c);
int sparse_row_chunks(const AttnCall& c);
// Split-KV decode: splits for `groups` thread blocks over `units` key tiles each.
int decode_splits(int64_t groups, int64_t units, const DeviceProps& pr);
// Sparse calls the decode kernels take: <= kDecMaxT tokens, or token-level selection (Qb =
// 1) with <= kDecMaxMeanQlen tokens per sequence on average (multi-token decode at any B).
bool decode_sized_sparse(const AttnCall& c);
int decode_tiles_per_block(int Bs);
int64_t decode_sparse_groups(const AttnCall& c);
int64_t decode_dense_groups(const AttnCall& c);
// FlashAttention-2-style prefill: row tiles per warp (2 for D = 128 in dense and patch
// attention; sparse keeps 1, so a warp is one token's GQA group at G = 16).
int flash_row_tiles(bool sparse, int D);
int flash_sparse_tpc(const AttnCall& c);
// Token-chunk slots x KV heads of the flash kernels with tpc tokens per block.
int64_t flash_groups(const AttnCall& c, int tpc);
int flash_splits(int64_t groups, int64_t max_tiles, const AttnCall& c, int row_tiles, const DeviceProps& pr,
                 const Tuning& t);
int flash_dense_splits(const AttnCall& c, const DeviceProps& pr, const Tuning& t);
int flash_sparse_splits(const AttnCall& c, const DeviceProps& pr, const Tuning& t);
int wgmma_splits(const AttnCall& c, const DeviceProps& pr, const Tuning& t);

}  // namespace attn_geom
}  // namespace msa::MSA_GPU_NS
