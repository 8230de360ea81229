// Every routing of the CUDA backend's choosers: for each value of each kernel-choice knob
// other than its default (backends/cuda/tuning.h: the user-facing switches and the test
// hooks), cuda:0 with that one knob set runs the quick cases of the ops the knob affects
// against cpu-ref; every case must pass. A wrong route shows up as a named failing test
// (the chooser tables themselves are tests/cuda_choose). Skips without a CUDA device.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "check/case.h"
#include "hal/registry.h"
#include "tests/common/no_cuda_device.h"

namespace msa::cases {
namespace {

struct Routing {
  const char* knob;
  const char* value;
  const char* ops;  // make_cases filter: the ops (and composite cases) the knob routes
};

constexpr const char* kPrefillOps = "sparse_block_attention,dense_attention,patch_attention_3d";
constexpr const char* kDecodeOps = "sparse_block_attention,dense_attention";
constexpr const char* kBackwardOps = "sparse_block_attention_backward,dense_attention_backward";

const Routing kRoutings[] = {
    {"tier", "portable", ""},  // every op
    {"decode", "0", kDecodeOps},
    {"decode", "1", kDecodeOps},
    {"flash", "0", kPrefillOps},
    {"flash", "1", kPrefillOps},
    {"flash_sparse", "0", "sparse_block_attention"},
    {"flash_sparse", "1", "sparse_block_attention"},
    {"kv_outer", "0", "sparse_block_attention"},
    {"kv_outer", "1", "sparse_block_attention"},
    {"flash_union_pct", "0", "sparse_block_attention"},
    {"flash_union_pct", "100", "sparse_block_attention"},
    {"indexer", "0", "indexer_score,indexer_topk"},
    {"indexer", "1", "indexer_score,indexer_topk"},
    {"fused_topk", "0", "indexer_topk"},
    {"training_mma", "0", "sparse_block_attention_backward,dense_attention_backward,indexer_kl"},
    {"topk_register", "0", "block_topk,indexer_topk"},
    {"flash_splits", "2", kPrefillOps},
    {"cluster_merge", "1", kDecodeOps},
    {"pdl", "0", kDecodeOps},
    {"bwd_item_tokens", "3", kBackwardOps},
    {"kl_item_tokens", "3", "indexer_kl"},
    {"indexer_groups", "0", "indexer_score,indexer_topk"},
};

class CudaRouting : public ::testing::TestWithParam<Routing> {};

TEST_P(CudaRouting, QuickCasesMatchReference) {
  if (std::string why = test::no_cuda_device(); !why.empty()) GTEST_SKIP() << why;
  const Routing& r = GetParam();
  auto dev = hal::create_device("cuda:0");
  dev->set_tuning(r.knob, r.value);
  auto ref = hal::create_device("cpu-ref");
  const CaseList cases = make_cases("quick", r.ops);
  ASSERT_FALSE(cases.empty()) << "no quick case for " << r.ops;
  int ran = 0;
  for (const auto& c : cases) {
    const CheckResult res = c->check(*dev, *ref);
    if (res.skipped) continue;
    ++ran;
    EXPECT_TRUE(res.passed) << c->name() << " [" << c->vars() << "] with " << r.knob << "=" << r.value << ": "
                            << res.message;
  }
  EXPECT_GT(ran, 0) << "every quick case of " << r.ops << " was refused";
}

// Runs everywhere: every routing's filter names ops that have quick cases (a typo would
// leave a GPU run with nothing to check).
TEST(CudaRoutingCases, EveryRoutingHasQuickCases) {
  for (const Routing& r : kRoutings) EXPECT_FALSE(make_cases("quick", r.ops).empty()) << r.knob << ": " << r.ops;
}

std::string routing_name(const ::testing::TestParamInfo<Routing>& info) {
  return std::string(info.param.knob) + "_" + info.param.value;
}

INSTANTIATE_TEST_SUITE_P(EveryKnobValue, CudaRouting, ::testing::ValuesIn(kRoutings), routing_name);

}  // namespace
}  // namespace msa::cases
