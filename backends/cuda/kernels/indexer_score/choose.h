// indexer_score's kernels on CUDA and the one function that picks among them from the
// arguments, the device and its Tuning (plain C++: tested without a GPU in
// tests/cuda_choose). entry.cu launches what it picks.
#pragma once
#include <cstdint>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "hal/dtype.h"
#include "ops/args.h"

namespace msa::cuda {

enum class IndexerKernel {
  portable,       // CUDA cores, any shape (portable/indexer_score.cu, also HIP's)
  decode_mma,     // Qb = 1, a few tokens per sequence, on mma.sync (decode_mma.cu)
  prefill_wgmma,  // many queries per sequence on sm_90a wgmma + TMA (prefill_wgmma.cu)
  prefill_tc,     // many queries per sequence on mma.sync (prefill_tc.cu)
};
const char* kernel_name(IndexerKernel k);

// What the choice reads from the arguments.
struct IndexerShape {
  hal::DType qi = hal::DType::bf16, keys = hal::DType::bf16;
  bool ki_scale = false;          // fp8 per-key scales given (NVFP4 group scales are always given)
  bool lse = false;               // log-sum-exp pooling
  int64_t T = 0, Hi = 0, Di = 0;  // qi [T][Hi][Di]
  int64_t B = 0, MB = 0;          // sequences, block_table columns
  int64_t P = 0, Bs = 0;          // key pages, tokens per page
  int64_t NQ = 0;
  int Qb = 1;
  // Alignment of the data: qi and the keys on 16 bytes, fp8 key scales on 4, NVFP4 group
  // scales on 2.
  bool qi_16 = true, keys_16 = true, scale_4 = true, scale_2 = true;
};
IndexerShape indexer_shape(const ops::IndexerScoreArgs& a);

IndexerKernel choose_indexer_score(const IndexerShape& s, const DeviceProps& pr, const Tuning& t);

// Multi-token decode (speculative drafts, MTP): decode_mma serves `tokens` consecutive
// tokens of one sequence from one read of its keys, the mma's 8-column tiles holding
// (token, head) pairs (`ntiles` of them, 1, 2 or 4). Calls of at most 64 tokens, or of at
// most kDecodeMaxQlen tokens per sequence on average, run there.
inline constexpr int kDecodeMaxQlen = 16;
struct DecodeGroups {
  int tokens = 1;     // tokens per group (a sequence's last group may hold fewer)
  int ntiles = 1;     // 8-column mma tiles per group
  int64_t items = 0;  // groups the grid covers: at least the call's, at most T (one token: NQ)
  int64_t full = 0;   // groups of a batch of equal q_len, ceil(T / tokens): what the split targets
};
DecodeGroups decode_groups(const IndexerShape& s, const Tuning& t);

// indexer_topk (indexer_score then block_topk) fused into the decode kernel: one select
// block per row after the indexer's blocks, waiting on its query block's arrival counter
// (one token per group).
inline constexpr int kFusedTopkMaxBlocks = 2048;  // row length (256K tokens at Bs = 128)
inline constexpr int kFusedTopkMaxNQ = 64;        // query blocks per call
enum class IndexerTopkKernel {
  separate,      // indexer_score, then block_topk
  fused_decode,  // decode_mma with the select in its last blocks
};
const char* kernel_name(IndexerTopkKernel k);
// `Hs`: block_score's heads. The fused kernel also needs a free per-stream counter slot,
// which its launcher checks (separate then).
IndexerTopkKernel choose_indexer_topk(const IndexerShape& s, int64_t Hs, const DeviceProps& pr, const Tuning& t);

}  // namespace msa::cuda
