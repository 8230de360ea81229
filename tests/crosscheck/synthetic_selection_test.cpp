// The synthetic training selections (check/synthetic_selection.h): every row is what
// block_topk could return (ascending, distinct, valid, -1 padded, min(k, valid) blocks,
// the forced blocks in), seeded, and the correlated kind drifts slowly.
#include <gtest/gtest.h>

#include <set>

#include "check/synthetic_selection.h"
#include "hal/error.h"

namespace {

using msa::cases::Batch;
using msa::cases::SyntheticSelection;

void expect_valid_rows(const Batch& batch, const msa::hal::HostTensor& idx, int Bs, int k, int n_sink, int n_local) {
  const int64_t Hs = idx.shape[1];
  const int32_t* bi = idx.data<int32_t>();
  for (int64_t n = 0; n < batch.NQ(); ++n) {
    const auto& qb = batch.qblocks[static_cast<size_t>(n)];
    const int64_t nvalid = qb.p1 / Bs + 1;
    std::set<int64_t> want_forced;
    for (int64_t c = 0; c < n_sink && c < nvalid; ++c) want_forced.insert(c);
    for (int64_t c = qb.p0 / Bs - n_local + 1; n_local > 0 && c <= qb.p1 / Bs; ++c)
      if (c >= 0) want_forced.insert(c);
    for (int64_t h = 0; h < Hs; ++h) {
      const int32_t* row = bi + (n * Hs + h) * k;
      std::set<int64_t> got;
      int count = 0;
      for (int j = 0; j < k; ++j) {
        if (row[j] < 0) {
          for (int r = j; r < k; ++r) ASSERT_EQ(row[r], -1) << "padding only at the end, row " << n;
          break;
        }
        ASSERT_LT(row[j], nvalid) << "row " << n;
        if (j > 0) ASSERT_GT(row[j], row[j - 1]) << "ascending and distinct, row " << n;
        got.insert(row[j]);
        ++count;
      }
      ASSERT_EQ(count, std::min<int64_t>(k, nvalid)) << "row " << n;
      for (int64_t c : want_forced) ASSERT_TRUE(got.count(c)) << "forced block " << c << " missing, row " << n;
    }
  }
}

TEST(SyntheticSelection, RowsAreValidWithTheForcedBlocks) {
  for (auto kind : {SyntheticSelection::random, SyntheticSelection::correlated}) {
    SCOPED_TRACE(msa::cases::synthetic_selection_name(kind));
    const Batch one({700}, {700}, 1);
    expect_valid_rows(one, msa::cases::synthetic_block_idx(one, 16, 2, 6, 1, 1, kind, 3), 16, 6, 1, 1);
    expect_valid_rows(one, msa::cases::synthetic_block_idx(one, 16, 2, 6, 2, 2, kind, 3), 16, 6, 2, 2);
    expect_valid_rows(one, msa::cases::synthetic_block_idx(one, 16, 1, 6, 0, 0, kind, 3), 16, 6, 0, 0);
    const Batch blocks({300, 130}, {300, 130}, 32);  // query blocks spanning three key blocks
    expect_valid_rows(blocks, msa::cases::synthetic_block_idx(blocks, 16, 2, 6, 1, 1, kind, 3), 16, 6, 1, 1);
  }
}

TEST(SyntheticSelection, SeededAndCorrelatedDriftsSlowly) {
  const Batch b({4096}, {4096}, 1);
  const auto r1 = msa::cases::synthetic_block_idx(b, 16, 2, 8, 1, 1, SyntheticSelection::random, 5);
  const auto r2 = msa::cases::synthetic_block_idx(b, 16, 2, 8, 1, 1, SyntheticSelection::random, 5);
  const auto r3 = msa::cases::synthetic_block_idx(b, 16, 2, 8, 1, 1, SyntheticSelection::random, 6);
  EXPECT_EQ(r1.bytes, r2.bytes);
  EXPECT_NE(r1.bytes, r3.bytes);
  const auto c = msa::cases::synthetic_block_idx(b, 16, 2, 8, 1, 1, SyntheticSelection::correlated, 5);
  // Random: sink and local shared, the other 6 of ~250 blocks rarely; correlated: most.
  EXPECT_LT(msa::cases::adjacent_overlap(b, r1), 0.4);
  EXPECT_GT(msa::cases::adjacent_overlap(b, c), 0.9);
  EXPECT_LT(msa::cases::adjacent_overlap(b, c), 1.0);  // it does drift
}

TEST(SyntheticSelection, RejectsForcedBlocksPastK) {
  const Batch b({512}, {512}, 64);
  EXPECT_THROW(msa::cases::synthetic_block_idx(b, 16, 1, 4, 1, 1, SyntheticSelection::random, 1), msa::Error);
  EXPECT_THROW(msa::cases::parse_synthetic_selection("walk", "--selection"), msa::Error);
}

}  // namespace
