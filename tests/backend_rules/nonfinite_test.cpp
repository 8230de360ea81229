// The non-finite rule of docs/spec.md ("Non-finite inputs") on every backend with a
// device here: NaN or Inf in an attended key or value, or logits that overflow f32, give
// NaN in the row's out and lse (never the empty-set result out = 0, lse = -inf); rows that
// do not attend the bad token, and an empty selection, are unaffected.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "tests/backend_rules/rules_util.h"

namespace {

using namespace msa::test::rules;

// Rows (t, h): sequence t, heads 2g, 2g+1 read KV head g.
void expect_rows(const Out& o, const std::function<bool(int t, int h)>& nan_row, const std::string& what) {
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < 4; ++h) {
      const float lse = o.lse.get(static_cast<size_t>(t * 4 + h));
      bool out_nan = true, out_finite = true;
      for (int d = 0; d < 64; ++d) {
        const float x = o.out.get(static_cast<size_t>((t * 4 + h) * 64 + d));
        out_nan &= std::isnan(x);
        out_finite &= std::isfinite(x);
      }
      if (nan_row(t, h)) {
        EXPECT_TRUE(std::isnan(lse) && out_nan) << what << ": row (" << t << ", " << h << ") lse " << lse;
      } else {
        EXPECT_TRUE(std::isfinite(lse) && out_finite) << what << ": row (" << t << ", " << h << ") lse " << lse;
      }
    }
}

TEST(NonFinite, AttendedNanOrInfGivesNanRows) {
  ASSERT_FALSE(devices().empty());
  for (const std::string& dev : devices())
    for (bool sparse : {false, true}) {
      const std::string tag = dev + (sparse ? " sparse" : " dense");
      auto seq0_g1 = [](int t, int h) { return t == 0 && h / 2 == 1; };
      for (float bad : {kNaN, kInf, -kInf}) {
        Batch b;
        b.k.set(b.at(0, 1, 3, 5), bad);  // a valid key of sequence 0, KV head 1
        expect_rows(run(dev, b, sparse), seq0_g1, tag + " key " + std::to_string(bad));
        Batch c;
        c.v.set(c.at(0, 1, 10, 7), bad);  // a valid value
        expect_rows(run(dev, c, sparse), seq0_g1, tag + " value " + std::to_string(bad));
      }
      Batch q;
      q.q.set(static_cast<size_t>((1 * 4 + 0) * 64 + 2), kNaN);  // query of (t 1, h 0)
      expect_rows(
          run(dev, q, sparse), [](int t, int h) { return t == 1 && h == 0; }, tag + " query NaN");
      Batch big;  // finite inputs whose logits overflow f32 for (t 1, h 3)
      for (int d = 0; d < 64; ++d) big.q.set(static_cast<size_t>((1 * 4 + 3) * 64 + d), 1e30f);
      for (int d = 0; d < 64; ++d) big.k.set(big.at(1, 1, 4, d), 1e30f);
      expect_rows(
          run(dev, big, sparse), [](int t, int h) { return t == 1 && h == 3; }, tag + " overflow");
      Batch slack;  // NaN past kv_len (sequence 1 ends at 9): no effect
      slack.k.set(slack.at(1, 0, 12, 0), kNaN);
      slack.v.set(slack.at(1, 0, 12, 0), kNaN);
      expect_rows(
          run(dev, slack, sparse), [](int, int) { return false; }, tag + " slack");
    }
}

// Nothing selected stays the empty-set result, distinct from NaN.
TEST(NonFinite, EmptySelectionIsZeroAndMinusInf) {
  for (const std::string& dev : devices()) {
    Batch b;
    std::fill(b.block_idx.data<int32_t>(), b.block_idx.data<int32_t>() + 8, -1);
    const Out o = run(dev, b, true);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(o.lse.get(static_cast<size_t>(i)), -kInf) << dev;
    for (int64_t i = 0; i < o.out.numel(); ++i) ASSERT_EQ(o.out.get(static_cast<size_t>(i)), 0.0f) << dev;
  }
}

}  // namespace
