// The training ops' routing: sparse_block_attention_backward / dense_attention_backward
// (backends/cuda/kernels/attention_backward/choose.h) and indexer_kl (indexer_kl/choose.h).
#include <gtest/gtest.h>

#include "backends/cuda/kernels/attention_backward/choose.h"
#include "backends/cuda/kernels/indexer_kl/choose.h"
#include "tests/cuda_choose/devices.h"

namespace msa::cuda::test {
namespace {

using hal::DType;

// M3 training: B sequences of `len` tokens, the whole sequence a query chunk, Qb = 64.
BackwardShape m3_backward(int64_t B, int64_t len, bool sparse) {
  BackwardShape s;
  s.dtype = DType::bf16;
  s.T = B * len;
  s.Hq = kHq;
  s.D = kD;
  s.MB = len / kBs;
  s.P = B * s.MB;
  s.Hkv = kHkv;
  s.Bs = kBs;
  s.B = B;
  s.sparse = sparse;
  s.Hs = sparse ? kHkv : 0;
  s.k = sparse ? kK : 0;
  return s;
}

KlShape m3_kl(int64_t B, int64_t len, bool sparse) {
  KlShape s;
  s.T = B * len;
  s.Hq = kHq;
  s.D = kD;
  s.MB = len / kBs;
  s.P = B * s.MB;
  s.Hkv = kHkv;
  s.Bs = kBs;
  s.Hs = kHkv;
  s.Di = kDi;
  s.sparse = sparse;
  s.bidx_Hs = sparse ? kHkv : 0;
  s.k = sparse ? kK : 0;
  return s;
}

TEST(ChooseAttentionBackward, M3OnTensorCoresWhereTheTilesFit) {
  for (bool sparse : {true, false}) {
    const BackwardShape s = m3_backward(1, 32 << 10, sparse);
    EXPECT_KERNEL(choose_attention_backward(s, sm90(), defaults()), BackwardKernel::mma);
    EXPECT_KERNEL(choose_attention_backward(s, sm80(), defaults()), BackwardKernel::mma);
    // D = 128 needs 139408 bytes of shared memory: more than sm_86's 99 KiB.
    EXPECT_KERNEL(choose_attention_backward(s, sm86(), defaults()), BackwardKernel::portable);
    BackwardShape d64 = s;
    d64.D = 64;
    EXPECT_KERNEL(choose_attention_backward(d64, sm86(), defaults()), BackwardKernel::mma);
  }
}

TEST(ChooseAttentionBackward, KnobValuesAndLimits) {
  const BackwardShape s = m3_backward(1, 8192, true);
  EXPECT_KERNEL(choose_attention_backward(s, sm90(), with("training_mma", 0)), BackwardKernel::portable);
  EXPECT_KERNEL(choose_attention_backward(s, sm90(), with("tier", 0)), BackwardKernel::portable);
  EXPECT_KERNEL(choose_attention_backward(s, sm90(), with("bwd_item_tokens", 3)), BackwardKernel::mma);
  EXPECT_EQ(backward_items(s, with("bwd_item_tokens", 3)).tpi, 3);
  EXPECT_GE(backward_items(s, defaults()).tpi, 1024 / 16) << "at least kMinItemRows rows of G heads";
  EXPECT_EQ(backward_items(s, defaults()).slabs, s.P * s.Hkv);
  BackwardShape f = s;
  f.dtype = DType::f32;
  EXPECT_KERNEL(choose_attention_backward(f, sm90(), defaults()), BackwardKernel::portable);
  f = s;
  f.D = 72;  // not a multiple of 16
  EXPECT_KERNEL(choose_attention_backward(f, sm90(), defaults()), BackwardKernel::portable);
  f = s;
  f.Hkv = 2;  // G = 32 heads a group
  EXPECT_KERNEL(choose_attention_backward(f, sm90(), defaults()), BackwardKernel::portable);
  f = s;
  f.aligned = false;
  EXPECT_KERNEL(choose_attention_backward(f, sm90(), defaults()), BackwardKernel::portable);
  f = m3_backward(1, 8192, false);
  f.T = int64_t{1} << 24;  // dense: T x max_blocks entry tokens past an int
  f.MB = 1024;
  EXPECT_FALSE(backward_items(f, defaults()).fits);
  EXPECT_KERNEL(choose_attention_backward(f, sm90(), defaults()), BackwardKernel::portable);
}

TEST(ChooseIndexerKl, M3OnTensorCoresWhereTheTilesFit) {
  for (bool sparse : {true, false}) {
    const KlShape s = m3_kl(1, 32 << 10, sparse);
    EXPECT_KERNEL(choose_indexer_kl(s, sm90(), defaults()), KlKernel::mma);
    EXPECT_KERNEL(choose_indexer_kl(s, sm80(), defaults()), KlKernel::mma);
    EXPECT_KERNEL(choose_indexer_kl(s, sm86(), defaults()), KlKernel::portable);
  }
}

TEST(ChooseIndexerKl, KnobValuesAndLimits) {
  const KlShape s = m3_kl(1, 8192, true);
  EXPECT_KERNEL(choose_indexer_kl(s, sm90(), with("training_mma", 0)), KlKernel::portable);
  EXPECT_KERNEL(choose_indexer_kl(s, sm90(), with("tier", 0)), KlKernel::portable);
  EXPECT_KERNEL(choose_indexer_kl(s, sm90(), with("kl_item_tokens", 3)), KlKernel::mma);
  EXPECT_EQ(kl_items(s, with("kl_item_tokens", 3)).tpi, 3);
  EXPECT_KERNEL(choose_indexer_kl(s, sm90(), with("bwd_item_tokens", 3)), KlKernel::mma);
  EXPECT_EQ(kl_items(s, with("bwd_item_tokens", 3)).tpi, kl_items(s, defaults()).tpi) << "the other op's hook";
  KlShape f = s;
  f.bf16 = false;
  EXPECT_KERNEL(choose_indexer_kl(f, sm90(), defaults()), KlKernel::portable);
  f = s;
  f.Hq = 48;  // G = 12: not a power of two
  EXPECT_KERNEL(choose_indexer_kl(f, sm90(), defaults()), KlKernel::portable);
  f = s;
  f.shared = true;  // shared selection needs one KV head and one selection head
  EXPECT_KERNEL(choose_indexer_kl(f, sm90(), defaults()), KlKernel::portable);
  f.Hkv = 1;
  f.Hq = 16;
  f.Hs = 1;
  f.bidx_Hs = 1;
  EXPECT_KERNEL(choose_indexer_kl(f, sm90(), defaults()), KlKernel::mma);
  f = s;
  f.Di = 136;
  EXPECT_KERNEL(choose_indexer_kl(f, sm90(), defaults()), KlKernel::portable);
  f = s;
  f.aligned = false;
  EXPECT_KERNEL(choose_indexer_kl(f, sm90(), defaults()), KlKernel::portable);
}

}  // namespace
}  // namespace msa::cuda::test
