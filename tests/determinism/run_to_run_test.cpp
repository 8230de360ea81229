// Every backend with a device returns bitwise-identical outputs for identical inputs,
// run after run on one device and on a freshly opened device (docs/spec.md, "Validity":
// results are bitwise reproducible; no float atomics in reductions). Covers every op of
// the cross-check library's "quick" set.
#include <gtest/gtest.h>

#include "check/case.h"
#include "hal/registry.h"
#include "run_util.h"

namespace {

class RunToRun : public ::testing::TestWithParam<std::string> {};

TEST_P(RunToRun, QuickCasesAreBitwiseIdentical) {
  const std::string backend = GetParam();
  if (const std::string why = msa_test::unavailable(backend); !why.empty()) GTEST_SKIP() << why;
  auto dev = msa::hal::create_device(backend);
  int ran = 0;
  for (const auto& c : msa::cases::make_cases("quick")) {
    SCOPED_TRACE(c->name() + " " + c->vars());
    const msa_test::Outputs first = msa_test::run_case(*c, *dev, c->seed());
    if (!first.skipped.empty()) continue;  // the backend refuses this size (supports())
    const msa_test::Outputs again = msa_test::run_case(*c, *dev, c->seed());
    EXPECT_EQ(msa_test::bitwise_diff(first, again), "") << "second run on the same device";
    auto fresh = msa::hal::create_device(backend);
    const msa_test::Outputs other = msa_test::run_case(*c, *fresh, c->seed());
    EXPECT_EQ(msa_test::bitwise_diff(first, other), "") << "run on a freshly opened device";
    ++ran;
  }
  EXPECT_GT(ran, 0) << backend << " refused every case";
}

INSTANTIATE_TEST_SUITE_P(Backends, RunToRun, ::testing::ValuesIn(msa_test::kBackends), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

}  // namespace
