// The KV split choice of the flash prefill kernels (backends/cuda/kernels/kv_splits.h).
// Pure C++: runs without a GPU.
#include <gtest/gtest.h>

#include "backends/cuda/kernels/kv_splits.h"

namespace msa {
namespace {

using gpu_common::choose_kv_splits;

TEST(KvSplits, SplitsOnlyWhenTheBlocksLeaveTheGpuHalfEmpty) {
  // 132 resident blocks: 264 or more blocks fill it twice, no split.
  EXPECT_EQ(choose_kv_splits(264, 1024, 1024, 128, 132, 64, 8, 0), 1);
  // 4 blocks of 1024 tiles on 132 slots: split so that the waves fill the GPU.
  const int s = choose_kv_splits(4, 1024, 64, 128, 132, 64, 8, 0);
  EXPECT_GT(s, 16);
  EXPECT_LE(s, 64);
  EXPECT_LE(4 * s, 2 * 132) << "no more than two waves of split blocks";
  // Each split keeps at least min_tiles tiles.
  EXPECT_LE(choose_kv_splits(4, 24, 64, 128, 132, 64, 8, 0), 3);
  EXPECT_EQ(choose_kv_splits(4, 15, 64, 128, 132, 64, 8, 0), 1);
}

TEST(KvSplits, PartialsStayWithin512MiBForcedOrNot) {
  const int64_t rows = int64_t{1} << 20;  // 1M rows x (128 + 1) floats: 516 MiB per split
  EXPECT_LE(choose_kv_splits(1, 4096, rows / 8, 128, 132, 64, 8, 0) * (rows / 8) * 129 * 4, int64_t{512} << 20);
  EXPECT_EQ(choose_kv_splits(1, 4096, rows, 128, 132, 64, 8, 0), 1);
  EXPECT_EQ(choose_kv_splits(1, 4096, rows, 128, 132, 64, 8, 32), 1) << "a forced count obeys the bound too";
  EXPECT_EQ(choose_kv_splits(1, 4096, 1024, 128, 132, 64, 8, 32), 32);
  EXPECT_EQ(choose_kv_splits(1, 5, 1024, 128, 132, 64, 8, 32), 5) << "never more splits than tiles";
}

}  // namespace
}  // namespace msa
