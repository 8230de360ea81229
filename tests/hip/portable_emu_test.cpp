// The portable kernels themselves (backends/cuda/kernels/portable/*.cu, the sources the
// HIP backend compiles), run in the CPU emulation at wave 64 (as AMD CDNA) and wave 32
// (as NVIDIA, the control) on the quick cross-check cases against cpu-ref
// (MSA_EMU_CASES=full: the full set, a few minutes). An op without a portable source yet
// is skipped with that reason; a case the portable table refuses (supports()) is
// reported, not failed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "check/case.h"
#include "check/set_builders.h"
#include "hal/op_id.h"
#include "hal/registry.h"
#include "tests/hip/emu/emu_device.h"

namespace msa::cases {
namespace {

std::unique_ptr<hal::Device> emu_device(int wave) {
  return wave == 64 ? emu64::make_emu_device() : emu32::make_emu_device();
}

std::vector<std::string> all_ops() {
  std::vector<std::string> ops;
  for (int i = 0; i < hal::kOpCount; ++i) ops.push_back(hal::op_name(static_cast<hal::OpId>(i)));
  return ops;
}

class PortableEmu : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(PortableEmu, QuickCasesMatchReference) {
  const auto& [wave, op] = GetParam();
  auto dev = emu_device(wave);
  hal::OpId id{};
  ASSERT_TRUE(hal::parse_op(op, id));
  const hal::KernelEntry& entry = dev->kernels()[id];
  // A composite op without a fused kernel runs as its parts.
  if (!entry.run && !hal::is_composite(id)) GTEST_SKIP() << op << ": " << entry.reason;
  const char* set_env = std::getenv("MSA_EMU_CASES");  // "full" for the whole contract (minutes)
  const std::string set = set_env != nullptr && *set_env != '\0' ? set_env : "quick";
  const CaseList cases = make_cases(set, op);
  if (cases.empty()) GTEST_SKIP() << "no quick case for " << op;
  auto ref = hal::create_device("cpu-ref");
  int skipped = 0;
  std::string skips;
  for (const auto& c : cases) {
    const CheckResult r = c->check(*dev, *ref);
    if (r.skipped) {
      ++skipped;
      skips += "\n  " + c->vars() + ": " + r.message;
      continue;
    }
    EXPECT_TRUE(r.passed) << op << " [" << c->vars() << "] on " << dev->name() << ": " << r.message;
  }
  if (skipped > 0)
    std::cout << "[ SKIPPED  ] " << skipped << " of " << cases.size() << " " << op << " cases refused by "
              << dev->name() << ":" << skips << "\n";
}

// block_topk's register paths (one block per row, rows split over chunks) run only for at
// most 2 x SMs rows: on a device reporting 600 SMs every full case of up to 1200 rows
// takes them (at 2 SMs none does), including the long rows (> 1024 blocks) of the split
// path and rows with forced blocks (sinks, local window).
TEST(PortableEmuTopk, RegisterPathsMatchReference) {
  auto ref = hal::create_device("cpu-ref");
  for (int wave : {64, 32}) {
    auto dev = wave == 64 ? emu64::make_emu_device(600) : emu32::make_emu_device(600);
    int ran = 0;
    for (const auto& c : make_cases("full", "block_topk")) {
      const CheckResult r = c->check(*dev, *ref);
      if (r.skipped) continue;
      ++ran;
      EXPECT_TRUE(r.passed) << "block_topk [" << c->vars() << "] on " << dev->name() << ": " << r.message;
    }
    EXPECT_GT(ran, 30) << "most full block_topk cases must run on " << dev->name();
  }
}

// The wide path (a 512-thread block per row, 8 or 16 keys per thread) takes rows of over
// 2048 blocks when there are more than 2 per SM: on the emulation's 2 SMs, a few rows
// of 3004 scores (float4 loads) with sinks and a local window, and rows of 12502 scores
// (scalar loads) in shared mode where one sequence's rows hold more than 8192 valid
// blocks (the row kernel after the wide one).
TEST(PortableEmuTopk, WidePathMatchesReference) {
  using sets::attn;
  AttnParams w = attn({{6}, {192192}}, 8, 2, 64, 64, 1, 16, sets::kBF16);
  w.n_sink = 2;
  w.n_local = 2;
  const AttnParams mixed =
      attn({{5, 3}, {524160, 800040}}, 8, 2, 64, 64, 1, 64, sets::kBF16, ops::SelectionMode::shared);
  auto ref = hal::create_device("cpu-ref");
  for (int wave : {64, 32}) {
    auto dev = emu_device(wave);
    for (const AttnParams& p : {w, mixed}) {
      const auto c = block_topk_case(p);
      const CheckResult r = c->check(*dev, *ref);
      EXPECT_FALSE(r.skipped) << c->vars() << ": " << r.message;
      EXPECT_TRUE(r.passed) << "block_topk [" << c->vars() << "] on " << dev->name() << ": " << r.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, PortableEmu,
                         ::testing::Combine(::testing::Values(64, 32), ::testing::ValuesIn(all_ops())),
                         [](const auto& info) {
                           return "wave" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace msa::cases
