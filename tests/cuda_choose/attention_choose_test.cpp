// The forward attention choosers (backends/cuda/kernels/attention/choose.h): which kernel
// each op takes for the M3 shapes (Hq 64, Hkv 4, D 128, Bs 128, k 16, bf16) at decode and
// prefill, on an sm_90 (H200) and an sm_80 (A100) device, under every value of the knobs
// they read.
#include "backends/cuda/kernels/attention/choose.h"

#include <gtest/gtest.h>

namespace msa::cuda {
namespace {

DeviceProps h200() {
  DeviceProps p;
  p.name = "H200";
  p.sm_count = 132;
  p.cc_major = 9;
  p.cc_minor = 0;
  p.hopper_code = true;
  return p;
}

DeviceProps a100() {
  DeviceProps p;
  p.name = "A100";
  p.sm_count = 108;
  p.cc_major = 8;
  p.cc_minor = 0;
  return p;
}

// M3 layer: B sequences of q_len new tokens each over `context` cached tokens, Qb = 1.
AttnCall m3(int B, int q_len, int64_t context) {
  AttnCall c;
  c.dtype = hal::DType::bf16;
  c.T = int64_t{B} * q_len;
  c.Hq = 64;
  c.Hkv = 4;
  c.G = 16;
  c.D = 128;
  c.B = B;
  c.Bs = 128;
  c.max_blocks = static_cast<int>((context + c.Bs - 1) / c.Bs);
  c.Qb = 1;
  c.NQ = c.T;
  c.k = 16;
  c.Hs = 4;
  c.counter_slot = 0;
  c.pages = int64_t{B} * c.max_blocks;
  return c;
}
AttnCall decode_b8() { return m3(8, 1, 1 << 20); }
AttnCall decode_b1() { return m3(1, 1, 1 << 20); }
AttnCall prefill_8k() { return m3(1, 8192, 128 * 1024); }

// Patch attention: N patches of H heads (G = 1).
AttnCall patch(int64_t N) {
  AttnCall c;
  c.dtype = hal::DType::bf16;
  c.T = N;
  c.Hq = c.Hkv = 16;
  c.G = 1;
  c.D = 128;
  return c;
}

Tuning with(int Tuning::*knob, int value) {
  Tuning t;
  t.*knob = value;
  return t;
}

using SK = SparseAttentionKernel;
using DK = DenseAttentionKernel;
using PK = PatchAttentionKernel;

#define EXPECT_ROUTE(expected, got) EXPECT_STREQ(kernel_name(expected), kernel_name(got))

TEST(AttentionChoose, DefaultsOnH200) {
  const DeviceProps pr = h200();
  const Tuning t;
  EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(decode_b8(), pr, t));
  EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(decode_b1(), pr, t));
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(prefill_8k(), pr, t));  // Qb = 1: from the selection
  EXPECT_ROUTE(DK::decode_split, choose_dense_attention(decode_b8(), pr, t));
  EXPECT_ROUTE(DK::decode_split, choose_dense_attention(decode_b1(), pr, t));
  EXPECT_ROUTE(DK::flash_wgmma, choose_dense_attention(prefill_8k(), pr, t));
  EXPECT_ROUTE(PK::flash, choose_patch_attention(patch(4096), pr, t));
}

TEST(AttentionChoose, DefaultsOnA100) {
  const DeviceProps pr = a100();
  const Tuning t;
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(decode_b8(), pr, t));
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(decode_b1(), pr, t));
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(prefill_8k(), pr, t));
  EXPECT_ROUTE(DK::decode_split, choose_dense_attention(decode_b8(), pr, t));
  EXPECT_ROUTE(DK::flash, choose_dense_attention(prefill_8k(), pr, t));
  EXPECT_ROUTE(PK::flash, choose_patch_attention(patch(4096), pr, t));
}

TEST(AttentionChoose, SparsePrefillTakesFlashWhenBlocksSpanFewQueryBlocks) {
  AttnCall c = prefill_8k();
  c.Qb = 64;  // >= 8 tokens per flash block (128 rows / G 16)
  c.NQ = c.T / c.Qb;
  EXPECT_ROUTE(SK::flash, choose_sparse_attention(c, h200(), Tuning{}));
  EXPECT_ROUTE(SK::flash, choose_sparse_attention(c, a100(), Tuning{}));
  c.Qb = 4;
  c.NQ = c.T / c.Qb;
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, h200(), Tuning{}));
}

// Multi-token decode (q_len 2-16 per sequence, Qb = 1) stays on the decode kernels at any
// B; longer per-sequence runs (prefill chunks) and Qb > 1 past 512 tokens do not.
TEST(AttentionChoose, MultiTokenDecodeOnTheDecodeKernels) {
  const DeviceProps pr = h200();
  const Tuning t;
  EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(m3(32, 16, 50 << 10), pr, t));  // T = 512
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(m3(128, 8, 50 << 10), pr, t));    // T = 1024
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(m3(128, 16, 50 << 10), pr, t));   // T = 2048
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(m3(256, 16, 32 << 10), pr, t));   // T = 4096
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(m3(32, 17, 50 << 10), pr, t));        // 17 per sequence
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(m3(128, 8, 50 << 10), a100(), t));
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(m3(128, 8, 50 << 10), pr, with(&Tuning::decode, 1)));
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(m3(128, 8, 50 << 10), pr, with(&Tuning::decode, 0)));
  AttnCall qb4 = m3(128, 8, 50 << 10);
  qb4.Qb = 4;
  qb4.NQ = 128 * 2;
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(qb4, pr, t));
  // Dense attention of such a batch: every token would read its whole sequence alone on the
  // decode kernels; the prefill kernels serve a sequence's tokens from one read.
  EXPECT_ROUTE(DK::flash_wgmma, choose_dense_attention(m3(128, 8, 50 << 10), pr, t));
}

TEST(AttentionChoose, TrainingShapes) {
  // Training runs the forward at prefill shapes; f32 (the gradient checks) is portable.
  AttnCall c = prefill_8k();
  EXPECT_ROUTE(DK::flash_wgmma, choose_dense_attention(c, h200(), Tuning{}));
  c.dtype = hal::DType::f32;
  EXPECT_ROUTE(SK::portable, choose_sparse_attention(c, h200(), Tuning{}));
  EXPECT_ROUTE(DK::portable, choose_dense_attention(c, h200(), Tuning{}));
  EXPECT_ROUTE(PK::portable, choose_patch_attention(
                                 [] {
                                   AttnCall p = patch(4096);
                                   p.dtype = hal::DType::f32;
                                   return p;
                                 }(),
                                 h200(), Tuning{}));
}

TEST(AttentionChoose, PortableTierTakesThePortableKernels) {
  const Tuning t = with(&Tuning::tier, 0);
  for (const DeviceProps& pr : {h200(), a100()}) {
    for (const AttnCall& c : {decode_b8(), decode_b1(), prefill_8k()}) {
      EXPECT_ROUTE(SK::portable, choose_sparse_attention(c, pr, t));
      EXPECT_ROUTE(DK::portable, choose_dense_attention(c, pr, t));
    }
    EXPECT_ROUTE(PK::portable, choose_patch_attention(patch(4096), pr, t));
  }
}

TEST(AttentionChoose, DecodeKnob) {
  const DeviceProps pr = h200();
  // 1: split-KV only.
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(decode_b8(), pr, with(&Tuning::decode, 1)));
  EXPECT_ROUTE(DK::decode_split, choose_dense_attention(decode_b8(), pr, with(&Tuning::decode, 1)));
  // 0: no decode kernels; sparse at Qb = 1 falls to the prefill choice, dense to the prefill kernels.
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(decode_b8(), pr, with(&Tuning::decode, 0)));
  EXPECT_ROUTE(DK::flash_wgmma, choose_dense_attention(decode_b8(), pr, with(&Tuning::decode, 0)));
  EXPECT_ROUTE(DK::flash, choose_dense_attention(decode_b8(), a100(), with(&Tuning::decode, 0)));
}

TEST(AttentionChoose, FlashKnob) {
  const DeviceProps pr = h200();
  AttnCall sparse = prefill_8k();
  sparse.Qb = 64;
  sparse.NQ = sparse.T / 64;
  // 1: FlashAttention-2-style only.
  EXPECT_ROUTE(DK::flash, choose_dense_attention(prefill_8k(), pr, with(&Tuning::flash, 1)));
  EXPECT_ROUTE(SK::flash, choose_sparse_attention(sparse, pr, with(&Tuning::flash, 1)));
  EXPECT_ROUTE(PK::flash, choose_patch_attention(patch(4096), pr, with(&Tuning::flash, 1)));
  // 0: wmma.
  EXPECT_ROUTE(DK::wmma, choose_dense_attention(prefill_8k(), pr, with(&Tuning::flash, 0)));
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(sparse, pr, with(&Tuning::flash, 0)));
  EXPECT_ROUTE(PK::wmma, choose_patch_attention(patch(4096), pr, with(&Tuning::flash, 0)));
  // Decode is not the flash knob's.
  EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(decode_b8(), pr, with(&Tuning::flash, 0)));
  EXPECT_ROUTE(DK::decode_split, choose_dense_attention(decode_b8(), pr, with(&Tuning::flash, 0)));
}

TEST(AttentionChoose, FlashSparseKnob) {
  const DeviceProps pr = h200();
  EXPECT_ROUTE(SK::flash, choose_sparse_attention(prefill_8k(), pr, with(&Tuning::flash_sparse, 1)));
  AttnCall c = prefill_8k();
  c.Qb = 64;
  c.NQ = c.T / 64;
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, pr, with(&Tuning::flash_sparse, 0)));
  EXPECT_ROUTE(SK::flash, choose_sparse_attention(c, pr, with(&Tuning::flash_sparse, -1)));
}

// Token-level sparse prefill (Qb = 1): by default the selection decides between the
// KV-block-outer kernel and the flash union walk (by_union); kv_outer 1 takes the
// KV-block-outer kernel wherever it applies (decode sizes included), 0 never.
TEST(AttentionChoose, KvOuterKnob) {
  const DeviceProps pr = h200();
  EXPECT_ROUTE(SK::kv_outer, choose_sparse_attention(prefill_8k(), pr, with(&Tuning::kv_outer, 1)));
  EXPECT_ROUTE(SK::kv_outer, choose_sparse_attention(decode_b8(), pr, with(&Tuning::kv_outer, 1)));
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(prefill_8k(), pr, with(&Tuning::kv_outer, 0)));
  EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(decode_b8(), pr, Tuning{}));
  // flash_sparse fixes the flash side: 1 always the union walk, 0 the KV-block-outer kernel.
  EXPECT_ROUTE(SK::flash, choose_sparse_attention(prefill_8k(), pr, with(&Tuning::flash_sparse, 1)));
  EXPECT_ROUTE(SK::kv_outer, choose_sparse_attention(prefill_8k(), pr, with(&Tuning::flash_sparse, 0)));
  AttnCall c = prefill_8k();
  c.Bs = 256;  // a slab larger than the kernel's shared memory holds
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, pr, Tuning{}));
  c = prefill_8k();
  c.Qb = 2;  // query blocks of several tokens
  c.NQ = c.T / 2;
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, pr, Tuning{}));
  c = prefill_8k();
  c.pages = 0;  // no cache
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, pr, Tuning{}));
  c = prefill_8k();
  c.dtype = hal::DType::f32;
  EXPECT_ROUTE(SK::portable, choose_sparse_attention(c, pr, with(&Tuning::kv_outer, 1)));
  // The union walk only with whole warps per token (G a multiple of 16).
  c = prefill_8k();
  c.Hkv = 16;
  c.G = 4;
  c.Hs = 16;
  EXPECT_ROUTE(SK::kv_outer, choose_sparse_attention(c, pr, Tuning{}));
  c.Hkv = 2;
  c.G = 32;
  c.Hs = 2;
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(c, pr, Tuning{}));
}

// The flash union walk up to flash_union_pct percent of tpc x k distinct blocks per flash
// block on average (8 tokens x 16 entries = 128 at the M3 shape), kv_outer past it.
// An 8K chunk at M3's shape (Hq 64, k 16, D 128: 256 KiB of partial outputs per token)
// takes two groups of 4096 tokens, not three: every extra group re-reads the slabs.
TEST(AttentionChoose, KvOuterGroupsOfAnEightKChunk) {
  EXPECT_EQ(4096, attn_geom::kv_outer_group_tokens(64, 16, 128));
  EXPECT_EQ(8192, attn_geom::kv_outer_group_tokens(64, 16, 64));
  EXPECT_EQ(1, attn_geom::kv_outer_group_tokens(1 << 20, 1 << 10, 128));  // never 0
}

TEST(AttentionChoose, ByUnionThreshold) {
  const Tuning t;  // 40%
  const int64_t blocks = 4096;
  EXPECT_ROUTE(SK::flash, choose_by_union(blocks * 20, blocks, 8, 16, t));  // correlated: ~20 per block
  EXPECT_ROUTE(SK::flash, choose_by_union(blocks * 128 * 40 / 100, blocks, 8, 16, t));
  EXPECT_ROUTE(SK::kv_outer, choose_by_union(blocks * 128 * 40 / 100 + 1, blocks, 8, 16, t));
  EXPECT_ROUTE(SK::kv_outer, choose_by_union(blocks * 127, blocks, 8, 16, t));  // independent: nearly all distinct
  EXPECT_ROUTE(SK::flash, choose_by_union(0, blocks, 8, 16, t));                // nothing selected
  EXPECT_ROUTE(SK::kv_outer, choose_by_union(1, blocks, 8, 16, with(&Tuning::flash_union_pct, 0)));
  EXPECT_ROUTE(SK::flash, choose_by_union(blocks * 128, blocks, 8, 16, with(&Tuning::flash_union_pct, 100)));
}

TEST(AttentionChoose, TestHooksDoNotRoute) {
  const DeviceProps pr = h200();
  for (int Tuning::*hook : {&Tuning::flash_splits, &Tuning::cluster_merge, &Tuning::pdl}) {
    for (int v : {0, 1, 4}) {
      const Tuning t = with(hook, v);
      EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(decode_b8(), pr, t));
      EXPECT_ROUTE(DK::decode_split, choose_dense_attention(decode_b8(), pr, t));
      EXPECT_ROUTE(DK::flash_wgmma, choose_dense_attention(prefill_8k(), pr, t));
    }
  }
}

TEST(AttentionChoose, FlashSplitsHookForcesTheSplitCount) {
  AttnCall c = m3(1, 256, 4096);  // few blocks, long enough for 8 tiles per split
  EXPECT_EQ(3, attn_geom::flash_dense_splits(c, h200(), with(&Tuning::flash_splits, 3)));
  EXPECT_EQ(3, attn_geom::wgmma_splits(c, h200(), with(&Tuning::flash_splits, 3)));
  EXPECT_EQ(1, attn_geom::flash_dense_splits(prefill_8k(), h200(), Tuning{}));  // enough blocks without splits
}

TEST(AttentionChoose, SplitDecodeNeedsACounterSlot) {
  // B = 8 on the A100 splits the selected blocks (32 groups on 108 SMs): without a counter
  // slot the split kernel cannot run and sparse falls to the prefill choice.
  const AttnCall c0 = decode_b8();
  EXPECT_GT(attn_geom::decode_splits(attn_geom::decode_sparse_groups(c0), int64_t{c0.k} * 2, a100()), 1);
  for (int slot : {-1, attn_geom::kDecCtrSlots}) {
    AttnCall c = decode_b8();
    c.counter_slot = slot;
    EXPECT_ROUTE(SK::by_union, choose_sparse_attention(c, a100(), Tuning{}));
    EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(c, h200(), Tuning{}));  // no split counters needed
  }
}

TEST(AttentionChoose, HopperKernelsNeedSm90aCode) {
  DeviceProps pr = h200();
  pr.hopper_code = false;  // e.g. a build for sm_80 only, running on an H200
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(decode_b8(), pr, Tuning{}));
  EXPECT_ROUTE(DK::flash, choose_dense_attention(prefill_8k(), pr, Tuning{}));
}

TEST(AttentionChoose, ShapesOutsideTheFastKernels) {
  const DeviceProps pr = h200();
  AttnCall c = decode_b8();
  c.D = 72;  // not a multiple of 16
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, pr, Tuning{}));
  EXPECT_ROUTE(DK::wmma, choose_dense_attention(c, pr, Tuning{}));
  c = decode_b8();
  c.D = 64;  // split decode, not the cluster kernel (D = 128 only)
  EXPECT_ROUTE(SK::decode_split, choose_sparse_attention(c, pr, Tuning{}));
  c = decode_b8();
  c.aligned16 = false;
  EXPECT_ROUTE(SK::wmma, choose_sparse_attention(c, pr, Tuning{}));
  EXPECT_ROUTE(DK::wmma, choose_dense_attention(c, pr, Tuning{}));
  c = decode_b8();
  c.k = 200;  // more selected blocks than the decode kernels take
  EXPECT_ROUTE(SK::by_union, choose_sparse_attention(c, pr, Tuning{}));
  c = prefill_8k();
  c.Bs = 64;  // wgmma tiles need Bs % 128 == 0
  EXPECT_ROUTE(DK::flash, choose_dense_attention(c, pr, Tuning{}));
  c = decode_b8();
  c.dtype = hal::DType::f16;
  EXPECT_ROUTE(SK::decode_cluster, choose_sparse_attention(c, pr, Tuning{}));
  EXPECT_ROUTE(PK::wmma, choose_patch_attention(patch(0), pr, Tuning{}));  // no patches: no flash chunk table
}

TEST(AttentionChoose, OlderGpusTakeThePortableKernels) {
  DeviceProps pr = a100();
  pr.cc_major = 7;  // no mma.sync bf16, no wmma bf16
  EXPECT_ROUTE(SK::portable, choose_sparse_attention(decode_b8(), pr, Tuning{}));
  EXPECT_ROUTE(DK::portable, choose_dense_attention(prefill_8k(), pr, Tuning{}));
  EXPECT_ROUTE(PK::portable, choose_patch_attention(patch(4096), pr, Tuning{}));
}

}  // namespace
}  // namespace msa::cuda
