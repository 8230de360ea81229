// indexer_score's and indexer_topk's routing (backends/cuda/kernels/indexer_score/choose.h).
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/kernels/indexer_score/choose.h"
#include "tests/cuda_choose/devices.h"

namespace msa::cuda::test {
namespace {

using hal::DType;

// M3's indexer over `context` tokens: B sequences of T / B queries each.
IndexerShape m3_indexer(int64_t B, int64_t T, int64_t context, int Qb = 1) {
  IndexerShape s;
  s.T = T;
  s.Hi = kHi;
  s.Di = kDi;
  s.B = B;
  s.MB = context / kBs;
  s.Bs = kBs;
  s.P = B * s.MB;
  s.Qb = Qb;
  s.NQ = B * ((T / B + Qb - 1) / Qb);
  return s;
}
const IndexerShape kDecode8 = m3_indexer(8, 8, 1 << 20);       // B = 8 at 1M
const IndexerShape kDecode1 = m3_indexer(1, 1, 128 << 10);     // B = 1 at 128K
const IndexerShape kPrefill = m3_indexer(1, 8192, 128 << 10);  // an 8K chunk at 128K
const IndexerShape kPrefill64 = m3_indexer(1, 8192, 128 << 10, 64);

IndexerKernel pick(const IndexerShape& s, const DeviceProps& pr, const Tuning& t = defaults()) {
  return choose_indexer_score(s, pr, t);
}

TEST(ChooseIndexerScore, M3DecodeRunsOnMmaSyncOnBothDevices) {
  EXPECT_KERNEL(pick(kDecode8, sm90()), IndexerKernel::decode_mma);
  EXPECT_KERNEL(pick(kDecode1, sm90()), IndexerKernel::decode_mma);
  EXPECT_KERNEL(pick(kDecode8, sm80()), IndexerKernel::decode_mma);
}

TEST(ChooseIndexerScore, M3PrefillRunsOnWgmmaOnHopperElseMmaSync) {
  EXPECT_KERNEL(pick(kPrefill, sm90()), IndexerKernel::prefill_wgmma);
  EXPECT_KERNEL(pick(kPrefill64, sm90()), IndexerKernel::prefill_wgmma);
  // The Di = 128 tiles take 162880 bytes + 4 KiB of slack: 64 bytes past an A100's 163 KiB,
  // so the A100 keeps M3 prefill on the portable kernel; Di = 64 fits.
  EXPECT_KERNEL(pick(kPrefill, sm80()), IndexerKernel::portable);
  IndexerShape di64 = kPrefill;
  di64.Di = 64;
  EXPECT_KERNEL(pick(di64, sm80()), IndexerKernel::prefill_tc);
  DeviceProps no_sm90a = sm90();
  no_sm90a.hopper_code = false;  // a build without sm_90a code
  EXPECT_KERNEL(pick(kPrefill, no_sm90a), IndexerKernel::prefill_tc);
  // sm_86's 99 KiB hold the Di = 64 tiles, not the Di = 128 ones.
  EXPECT_KERNEL(pick(kPrefill, sm86()), IndexerKernel::portable);
  EXPECT_KERNEL(pick(di64, sm86()), IndexerKernel::prefill_tc);
}

TEST(ChooseIndexerScore, KnobValues) {
  for (const auto& s : {kDecode8, kPrefill}) {
    EXPECT_KERNEL(pick(s, sm90(), with("tier", 0)), IndexerKernel::portable);
    EXPECT_KERNEL(pick(s, sm90(), with("indexer", 0)), IndexerKernel::portable);
  }
  EXPECT_KERNEL(pick(kDecode8, sm90(), with("indexer", 1)), IndexerKernel::decode_mma);
  EXPECT_KERNEL(pick(kPrefill, sm90(), with("indexer", 1)), IndexerKernel::prefill_tc);
  EXPECT_KERNEL(pick(kPrefill, sm90(), with("indexer", 2)), IndexerKernel::prefill_wgmma);
  // Knobs of other ops change nothing here.
  EXPECT_KERNEL(pick(kPrefill, sm90(), with("decode", 0)), IndexerKernel::prefill_wgmma);
  EXPECT_KERNEL(pick(kDecode8, sm90(), with("training_mma", 0)), IndexerKernel::decode_mma);
}

TEST(ChooseIndexerScore, DtypesAndLayouts) {
  IndexerShape s = kPrefill;
  s.keys = DType::fp8_e4m3;  // fp8 keys: mma.sync only
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::prefill_tc);
  s.ki_scale = true;
  s.scale_4 = false;  // scales at an odd address
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::portable);
  s = kPrefill;
  s.qi = DType::f32;
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::portable);
  s = kPrefill;
  s.qi = DType::f16;  // f16 x bf16 keys: no exact common MMA type
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::portable);
  s = kPrefill;
  s.qi_16 = false;
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::portable);
  s = kPrefill;
  s.Hi = 3;  // not a power of two: not wgmma
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::prefill_tc);
  s = kPrefill;
  s.Bs = 64;  // wgmma needs whole 128-key steps
  EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::prefill_tc);

  IndexerShape d = kDecode8;
  d.keys = DType::fp4_e2m1x2;
  EXPECT_KERNEL(pick(d, sm90()), IndexerKernel::decode_mma);
  d.scale_2 = false;  // NVFP4 scales are read two bytes at a time
  EXPECT_KERNEL(pick(d, sm90()), IndexerKernel::portable);
  d = kDecode8;
  d.Hi = 16;  // the decode kernel holds <= 8 heads
  EXPECT_KERNEL(pick(d, sm90()), IndexerKernel::portable);
  d = kDecode8;
  d.Qb = 4;
  EXPECT_KERNEL(pick(d, sm90()), IndexerKernel::portable);
  DeviceProps volta = sm80();
  volta.cc_major = 7;
  EXPECT_KERNEL(pick(kDecode8, volta), IndexerKernel::portable);
  EXPECT_KERNEL(pick(kPrefill, volta), IndexerKernel::portable);
}

TEST(ChooseIndexerScore, MultiTokenDecodeRunsOnTheDecodeKernel) {
  // 65 queries over 9 sequences, 1024 over 128 (8 drafts each), 16 per sequence: token
  // groups on the decode kernel; one token per block (the other routing) takes <= 64.
  for (const auto& s : {m3_indexer(9, 65, 64 << 10), m3_indexer(128, 1024, 50 << 10), m3_indexer(8, 128, 1 << 20)}) {
    EXPECT_KERNEL(pick(s, sm90()), IndexerKernel::decode_mma);
    EXPECT_KERNEL(pick(s, sm80()), IndexerKernel::decode_mma);
  }
  EXPECT_KERNEL(pick(m3_indexer(9, 65, 64 << 10), sm90(), with("indexer_groups", 0)), IndexerKernel::portable);
  EXPECT_KERNEL(pick(m3_indexer(128, 1024, 50 << 10), sm90(), with("indexer_groups", 0)), IndexerKernel::prefill_wgmma);
  // More than 16 tokens per sequence: the prefill kernels.
  EXPECT_KERNEL(pick(m3_indexer(8, 8 * 17, 1 << 20), sm90()), IndexerKernel::prefill_wgmma);
  EXPECT_KERNEL(pick(m3_indexer(128, 128, 50 << 10), sm90()), IndexerKernel::decode_mma);  // B = 128 decode
}

TEST(ChooseIndexerScore, DecodeGroupsFillTheMmaColumns) {
  struct Want {
    int64_t B, T;
    int Hi, tokens, ntiles;
    int64_t items, full;
  };
  // Hi = 4: 2 tokens per 8-column tile, up to 8 tokens in 4 tiles; q_len 16 makes two
  // groups of 8 per sequence; Hi = 1 takes 8 tokens per tile, Hi = 8 one; the grid covers
  // the groups' upper bound for any q_len split ((T + B (tokens - 1)) / tokens, at most T),
  // the split targets ceil(T / tokens).
  for (const Want w : {Want{8, 8, 4, 1, 1, 8, 8}, Want{8, 16, 4, 2, 1, 12, 8}, Want{8, 32, 4, 4, 2, 14, 8},
                       Want{8, 64, 4, 8, 4, 15, 8}, Want{8, 128, 4, 8, 4, 23, 16}, Want{8, 24, 4, 4, 2, 12, 6},
                       Want{4, 32, 1, 8, 1, 7, 4}, Want{4, 16, 8, 4, 4, 7, 4}, Want{2, 3, 4, 2, 1, 2, 2}}) {
    IndexerShape s = m3_indexer(w.B, w.T, 64 << 10);
    s.Hi = w.Hi;
    const DecodeGroups d = decode_groups(s, defaults());
    const std::string what = "B=" + std::to_string(w.B) + " T=" + std::to_string(w.T) + " Hi=" + std::to_string(w.Hi);
    EXPECT_EQ(d.tokens, w.tokens) << what;
    EXPECT_EQ(d.ntiles, w.ntiles) << what;
    EXPECT_EQ(d.items, w.items) << what;
    EXPECT_EQ(d.full, w.full) << what;
  }
  const DecodeGroups off = decode_groups(m3_indexer(8, 64, 64 << 10), with("indexer_groups", 0));
  EXPECT_EQ(off.tokens, 1);
  EXPECT_EQ(off.items, 64);
}

TEST(ChooseIndexerTopk, FusedForShortDecodeRows) {
  const auto pick_topk = [](const IndexerShape& s, const DeviceProps& pr, const Tuning& t = defaults()) {
    return choose_indexer_topk(s, kHkv, pr, t);
  };
  EXPECT_KERNEL(pick_topk(kDecode1, sm90()), IndexerTopkKernel::fused_decode);
  EXPECT_KERNEL(pick_topk(kDecode1, sm80()), IndexerTopkKernel::fused_decode);
  EXPECT_KERNEL(pick_topk(m3_indexer(8, 8, 256 << 10), sm90()), IndexerTopkKernel::fused_decode);
  // 1M: 8192 blocks a row, past the fused select's 2048.
  EXPECT_KERNEL(pick_topk(kDecode8, sm90()), IndexerTopkKernel::separate);
  EXPECT_KERNEL(pick_topk(kPrefill, sm90()), IndexerTopkKernel::separate);
  // At most one select block per SM: 64 queries x 4 heads > 132.
  EXPECT_KERNEL(pick_topk(m3_indexer(64, 64, 64 << 10), sm90()), IndexerTopkKernel::separate);
  EXPECT_KERNEL(pick_topk(kDecode1, sm90(), with("fused_topk", 0)), IndexerTopkKernel::separate);
  EXPECT_KERNEL(pick_topk(kDecode1, sm90(), with("indexer", 0)), IndexerTopkKernel::separate);
  EXPECT_KERNEL(pick_topk(kDecode1, sm90(), with("tier", 0)), IndexerTopkKernel::separate);
  // Token groups (q_len 2 at B = 8) take the separate select.
  EXPECT_KERNEL(pick_topk(m3_indexer(8, 16, 256 << 10), sm90()), IndexerTopkKernel::separate);
}

}  // namespace
}  // namespace msa::cuda::test
