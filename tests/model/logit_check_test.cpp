// The --check verdict: tolerance per step and per sequence, selection differences.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "model/logit_check.h"

namespace msa::model {
namespace {

StepResult step(std::vector<std::vector<float>> logits, std::vector<int32_t> sel) {
  StepResult r;
  r.logits = std::move(logits);
  hal::HostTensor t(hal::DType::i32, {static_cast<int64_t>(sel.size()) / 2, 1, 2});
  std::copy(sel.begin(), sel.end(), t.data<int32_t>());
  r.block_idx.push_back(t);
  return r;
}

const std::vector<float> kRow = {1.0f, -2.0f, 3.0f, 0.5f};

std::vector<float> scaled(float f) {
  std::vector<float> v = kRow;
  for (float& x : v) x *= f;
  return v;
}

std::string verdict(const LogitCheck& c) {
  std::ostringstream s;
  c.print(s);
  return s.str();
}

TEST(ModelLogitCheck, IdenticalPasses) {
  LogitCheck c(hal::DType::bf16);
  c.step(0, step({kRow, kRow}, {0, 1, 0, 2}), step({kRow, kRow}, {0, 1, 0, 2}));
  EXPECT_TRUE(c.passed()) << verdict(c);
}

TEST(ModelLogitCheck, WithinToleranceOnlyWhenEveryRowIs) {
  LogitCheck c(hal::DType::bf16);
  // NMSE of a 0.3% scale: 9e-6, under both limits.
  c.step(0, step({scaled(1.003f), kRow}, {0, 1}), step({kRow, kRow}, {0, 1}));
  EXPECT_TRUE(c.passed()) << verdict(c);
  // One row off by 2% (NMSE 4e-4 > 2e-4) fails.
  LogitCheck d(hal::DType::bf16);
  d.step(0, step({scaled(1.02f), kRow}, {0, 1}), step({kRow, kRow}, {0, 1}));
  EXPECT_FALSE(d.passed()) << verdict(d);
  // NaN never passes.
  LogitCheck e(hal::DType::bf16);
  e.step(0, step({{NAN, -2.0f, 3.0f, 0.5f}}, {0, 1}), step({kRow}, {0, 1}));
  EXPECT_FALSE(e.passed()) << verdict(e);
}

TEST(ModelLogitCheck, OverToleranceAfterASelectionDifferenceIsAllowed) {
  LogitCheck c(hal::DType::bf16);
  for (int i = 0; i < 30; ++i) c.step(i, step({kRow}, {0, 1}), step({kRow}, {0, 1}));
  c.step(30, step({scaled(1.1f)}, {0, 2}), step({kRow}, {0, 1}));  // another block chosen
  c.step(31, step({scaled(1.1f)}, {0, 1}), step({kRow}, {0, 1}));  // and its effect lingers
  EXPECT_TRUE(c.passed()) << verdict(c);
  EXPECT_NE(verdict(c).find("2 step(s) over tolerance after"), std::string::npos) << verdict(c);
}

TEST(ModelLogitCheck, ManySelectionDifferencesFail) {
  LogitCheck c(hal::DType::bf16);
  for (int i = 0; i < 10; ++i) c.step(i, step({kRow}, {0, i % 2 ? 2 : 1}), step({kRow}, {0, 1}));
  EXPECT_FALSE(c.passed()) << verdict(c);
}

TEST(ModelLogitCheck, F32IsStricter) {
  LogitCheck c(hal::DType::f32);
  c.step(0, step({scaled(1.0001f)}, {0, 1}), step({kRow}, {0, 1}));  // NMSE 1e-8
  EXPECT_FALSE(c.passed()) << verdict(c);
}

}  // namespace
}  // namespace msa::model
