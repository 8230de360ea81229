// block_topk's routing (backends/cuda/kernels/portable/block_topk_choose.h, also HIP's)
// and matmul's (backends/cuda/kernels/matmul/choose.h).
#include <gtest/gtest.h>

#include "backends/cuda/kernels/matmul/choose.h"
#include "backends/cuda/kernels/portable/block_topk_choose.h"
#include "tests/cuda_choose/devices.h"

namespace msa::cuda::test {
namespace {

// M3 rows: NQ query blocks x Hs = 4 selection heads of context / Bs blocks.
TopkPlan m3_topk(int64_t NQ, int64_t context, const DeviceProps& pr, const Tuning& t = defaults(), bool slot = true) {
  return choose_block_topk(NQ * kHkv, static_cast<int>(context / kBs), kK, pr.sm_count, t, slot);
}

TEST(ChooseBlockTopk, M3DecodeOnTheRegisterPaths) {
  // B = 1 at 128K: 1024 blocks a row, one block a row.
  EXPECT_KERNEL(m3_topk(1, 128 << 10, sm90()).kernel, TopkKernel::one_block);
  // B = 8 at 1M: 8192 blocks, 16 chunks of 512.
  const TopkPlan p = m3_topk(8, 1 << 20, sm90());
  EXPECT_KERNEL(p.kernel, TopkKernel::split);
  EXPECT_EQ(p.S, 16);
  EXPECT_EQ(p.chunk, 512);
  EXPECT_KERNEL(m3_topk(8, 1 << 20, sm80()).kernel, TopkKernel::split);
  // No counter slot left for this stream: one wide block per row.
  EXPECT_KERNEL(m3_topk(8, 1 << 20, sm90(), defaults(), false).kernel, TopkKernel::wide);
}

TEST(ChooseBlockTopk, ShortDecodeRowsOnOneBlockPrefillRowsOnTheWidePath) {
  // Rows of <= 2048 blocks take one block each with the keys in registers.
  EXPECT_KERNEL(m3_topk(8192, 128 << 10, sm90()).kernel, TopkKernel::one_block);      // 8K chunk at 128K
  EXPECT_KERNEL(m3_topk(128 * 8, 50 << 10, sm90()).kernel, TopkKernel::one_block);    // B = 128, q_len 8
  EXPECT_KERNEL(m3_topk(8192 / 64, 32 << 10, sm90()).kernel, TopkKernel::one_block);  // Qb = 64: 512 rows
  EXPECT_KERNEL(m3_topk(1024, 256 << 10, sm90()).kernel, TopkKernel::one_block);      // 2048 blocks
  // Longer rows: the split path for at most 2 rows per SM, else a wide block per row
  // (holding up to 8192 blocks; the launcher sends longer rows on to the row kernel).
  EXPECT_KERNEL(m3_topk(66, 1 << 20, sm90()).kernel, TopkKernel::split);
  EXPECT_KERNEL(m3_topk(67, 1 << 20, sm90()).kernel, TopkKernel::wide);
  EXPECT_KERNEL(m3_topk(8192, 1 << 20, sm90()).kernel, TopkKernel::wide);  // 8K chunk at 1M
  EXPECT_EQ(m3_topk(8192, 1 << 20, sm90()).chunk, 8192);
  EXPECT_KERNEL(m3_topk(8192, 2 << 20, sm90()).kernel, TopkKernel::wide);  // 16384 blocks
  EXPECT_EQ(m3_topk(8192, 2 << 20, sm90()).chunk, 8192);
}

TEST(ChooseBlockTopk, KnobValues) {
  EXPECT_KERNEL(m3_topk(1, 128 << 10, sm90(), with("topk_register", 0)).kernel, TopkKernel::rows);
  EXPECT_KERNEL(m3_topk(8, 1 << 20, sm90(), with("topk_register", 0)).kernel, TopkKernel::rows);
  // The portable tier keeps block_topk's paths: they are portable kernels.
  EXPECT_KERNEL(m3_topk(8, 1 << 20, sm90(), with("tier", 0)).kernel, TopkKernel::split);
  // k past the split path's 128: a wide block per row.
  EXPECT_KERNEL(choose_block_topk(32, 8192, 200, 132, defaults(), true).kernel, TopkKernel::wide);
  EXPECT_KERNEL(choose_block_topk(32, 8193, 200, 132, defaults(), true).kernel, TopkKernel::wide);
  // The merge holds S x k <= 2048 candidates: k = 128 allows 16 chunks.
  EXPECT_EQ(choose_block_topk(4, 32768, 128, 132, defaults(), true).S, 16);
}

TEST(ChooseMatmul, CublasOnTheNativeTier) {
  const MatmulShape m3{hal::DType::bf16, 8192, 6144, 3072};
  EXPECT_KERNEL(choose_matmul(m3, sm90(), defaults()), MatmulKernel::cublas);
  EXPECT_KERNEL(choose_matmul(m3, sm80(), defaults()), MatmulKernel::cublas);
  EXPECT_KERNEL(choose_matmul(m3, sm90(), with("tier", 0)), MatmulKernel::portable);
  EXPECT_KERNEL(choose_matmul({hal::DType::f32, 8, 8, 8}, sm90(), defaults()), MatmulKernel::cublas);
  EXPECT_KERNEL(choose_matmul({hal::DType::bf16, 8, 8, 0}, sm90(), defaults()), MatmulKernel::portable);
  EXPECT_KERNEL(choose_matmul({hal::DType::bf16, int64_t{1} << 31, 8, 8}, sm90(), defaults()), MatmulKernel::portable);
}

}  // namespace
}  // namespace msa::cuda::test
