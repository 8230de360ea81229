// Every backend msa knows, cross-checked against cpu-ref on the quick cases (the full set
// with MSA_CROSSCHECK_SET=full), one test per (backend, op). A backend that is not compiled in or has no device is
// skipped with its reason; a case the backend refuses (supports()) is reported and not a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>

#include "check/case.h"
#include "hal/op_id.h"
#include "hal/registry.h"

namespace msa::cases {
namespace {

const char* const kBackends[] = {"cpu-ref", "cpu", "cuda", "hip", "vulkan"};

std::vector<std::string> all_ops() {
  std::vector<std::string> ops;
  for (int i = 0; i < hal::kOpCount; ++i) ops.push_back(hal::op_name(static_cast<hal::OpId>(i)));
  return ops;
}

// "" when the backend has a device, else why not.
std::string unavailable(const std::string& backend) {
  for (const hal::BackendStatus& s : hal::list_backends()) {
    if (s.name != backend) continue;
    if (!s.compiled) return "backend " + backend + " " + s.unavailable_reason;
    if (s.devices.empty()) return "backend " + backend + " has no device: " + s.unavailable_reason;
    return "";
  }
  return "backend " + backend + " is unknown to the registry";
}

// MSA_CROSSCHECK_SET=full runs the full set instead of the quick one.
const char* case_set() {
  const char* s = std::getenv("MSA_CROSSCHECK_SET");
  return s != nullptr && *s != 0 ? s : "quick";
}

class CrossCheck : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CrossCheck, QuickCasesMatchReference) {
  const auto& [backend, op] = GetParam();
  if (std::string why = unavailable(backend); !why.empty()) GTEST_SKIP() << why;
  const CaseList cases = make_cases(case_set(), op);
  if (cases.empty()) GTEST_SKIP() << "no quick case for " << op;
  auto dev = hal::create_device(backend);
  auto ref = hal::create_device("cpu-ref");
  int skipped = 0;
  std::string skip_reasons;
  for (const auto& c : cases) {
    const CheckResult r = c->check(*dev, *ref);
    if (r.skipped) {
      ++skipped;
      skip_reasons += "\n  " + c->vars() + ": " + r.message;
      continue;
    }
    EXPECT_TRUE(r.passed) << op << " [" << c->vars() << "] on " << dev->name() << ": " << r.message;
  }
  if (skipped > 0) {
    std::cout << "[ SKIPPED  ] " << skipped << " of " << cases.size() << " " << op << " cases refused by "
              << dev->name() << ":" << skip_reasons << "\n";
    if (skipped == static_cast<int>(cases.size()) && !HasFailure())
      GTEST_SKIP() << dev->name() << " refuses every " << op << " case:" << skip_reasons;
  }
}

std::string param_name(const ::testing::TestParamInfo<CrossCheck::ParamType>& info) {
  std::string s = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Backends, CrossCheck,
                         ::testing::Combine(::testing::ValuesIn(std::vector<std::string>(std::begin(kBackends),
                                                                                         std::end(kBackends))),
                                            ::testing::ValuesIn(all_ops())),
                         param_name);

// The quick and full sets cover every op of the contract (docs/spec.md) and of the
// training contract (docs/training.md).
TEST(CaseSets, QuickAndFullCoverEveryOp) {
  for (const char* set : {"quick", "full"})
    for (const std::string& op : all_ops())
      EXPECT_FALSE(make_cases(set, op).empty()) << set << " has no " << op << " case";
}

// Every case of every set describes itself and has positive work, and the filter works.
TEST(CaseSets, CasesDescribeThemselves) {
  for (const char* set : {"quick", "full"}) {
    for (const auto& c : make_cases(set)) {
      EXPECT_FALSE(c->vars().empty());
      EXPECT_GE(c->bytes(), 0.0) << c->name() << " " << c->vars();
      EXPECT_GE(c->flops(), 0.0) << c->name() << " " << c->vars();
    }
  }
  const CaseList two = make_cases("full", "add,argmax");
  ASSERT_FALSE(two.empty());
  for (const auto& c : two) EXPECT_TRUE(c->name() == "add" || c->name() == "argmax") << c->name();
  EXPECT_THROW(make_cases("nonsense"), std::exception);
  EXPECT_THROW(make_cases("quick", "sparse_attention"), std::exception);  // a typo is an error
}

// The perf set at a small scale builds, names the reference configuration, and its
// sparse cases count only selected blocks (far fewer bytes than dense at long context).
TEST(CaseSets, PerfSetScales) {
  const CaseList perf = make_cases("perf", "", 1.0 / 256);
  ASSERT_FALSE(perf.empty());
  double sparse_bytes = 0, dense_bytes = 0;
  for (const auto& c : perf) {
    if (c->vars().find("kv=[4096]") == std::string::npos || c->vars().find("q=[1]") == std::string::npos) continue;
    if (c->name() == "sparse_block_attention") sparse_bytes = c->bytes();
    if (c->name() == "dense_attention") dense_bytes = c->bytes();
  }
  ASSERT_GT(sparse_bytes, 0);
  ASSERT_GT(dense_bytes, 0);
  // 16 of 32 blocks of 128 tokens selected: about half the K/V bytes of dense.
  EXPECT_LT(sparse_bytes, 0.6 * dense_bytes);
  EXPECT_GT(sparse_bytes, 0.4 * dense_bytes);
}

}  // namespace
}  // namespace msa::cases
