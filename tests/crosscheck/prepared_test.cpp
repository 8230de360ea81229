// The benchmark path of the case library: prepared cases rotate among input sets and
// compute what the checked path computes; tiled perf inputs are replicated exactly;
// guard and poison bytes are what the checker expects.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "check/case.h"
#include "check/device_io.h"
#include "hal/registry.h"

namespace msa::cases {
namespace {

bool all_finite(const hal::HostTensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.get(static_cast<size_t>(i)))) return false;
  return true;
}

TEST(Prepared, RotatesInputSetsAndComputes) {
  auto dev = hal::create_device("cpu-ref");
  auto cases = make_cases("quick", "dense_attention");
  ASSERT_FALSE(cases.empty());
  const Case& c = *cases[0];
  auto p = c.prepare(*dev, 2);
  ASSERT_EQ(p->unsupported(), "");
  EXPECT_GT(p->device_bytes(), 0u);
  p->run();
  const hal::HostTensor a = p->download("out");
  p->run();
  const hal::HostTensor b = p->download("out");
  p->run();
  const hal::HostTensor a2 = p->download("out");
  EXPECT_TRUE(all_finite(a));  // no poison left: the op wrote every element
  EXPECT_TRUE(all_finite(b));
  EXPECT_NE(a.bytes, b.bytes);                      // set 1 differs from set 0
  EXPECT_EQ(a.bytes, a2.bytes);                     // back to set 0: same result
  EXPECT_THROW(p->run_baseline(), std::exception);  // dense has no baseline
}

TEST(Prepared, MsaLayerRunsWithBaseline) {
  auto dev = hal::create_device("cpu-ref");
  auto cases = make_cases("perf", "msa_layer", 1.0 / 1024);
  ASSERT_FALSE(cases.empty());
  const Case& c = *cases[0];
  ASSERT_TRUE(c.has_baseline());
  auto p = c.prepare(*dev, 1);
  ASSERT_EQ(p->unsupported(), "");
  p->run();
  p->run_baseline();
  // One sequence, all blocks selected at this tiny context: sparse equals dense.
  const hal::HostTensor sparse = p->download("out"), dense = p->download("dense_out");
  ASSERT_TRUE(all_finite(sparse));
  EXPECT_EQ(sparse.bytes, dense.bytes) << c.vars();
}

// msa_layer_backward at its smallest context: the cpu backend's chain (indexer, top-k,
// sparse forward, backward, indexer_kl) and its dense baseline match cpu-ref's, every
// output and gradient under the contract's bounds; the baseline runs.
TEST(Prepared, MsaLayerBackwardMatchesCpuRef) {
  auto dev = hal::create_device("cpu");
  auto ref = hal::create_device("cpu-ref");
  int checked = 0;
  for (const auto& c : make_cases("perf", "msa_layer_backward", 1.0 / 256)) {
    if (c->vars().find("T=128 ") == std::string::npos) continue;
    SCOPED_TRACE(c->vars());
    const CheckResult r = c->check(*dev, *ref);
    EXPECT_TRUE(r.passed) << r.message;
    ASSERT_TRUE(c->has_baseline());
    auto p = c->prepare(*dev, 1);
    p->run();
    p->run_baseline();
    EXPECT_TRUE(all_finite(p->download("dense_dq")));
    EXPECT_GT(c->flops(), 0.0);
    ++checked;
  }
  EXPECT_EQ(checked, 2);  // random and correlated
}

// The training perf cases run with their forward as the baseline; the backward still reads
// out / lse after the baseline rewrote them, and its gradients stay finite.
TEST(Prepared, TrainingPerfCasesRunWithTheirForward) {
  auto dev = hal::create_device("cpu-ref");
  auto cases = make_cases("perf",
                          "dense_attention_backward,sparse_block_attention_backward,"
                          "patch_attention_3d_backward,indexer_kl",
                          1.0 / 1024);
  ASSERT_EQ(cases.size(), 5u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c->name() + " " + c->vars());
    ASSERT_TRUE(c->has_baseline());
    auto p = c->prepare(*dev, 1);
    ASSERT_EQ(p->unsupported(), "");
    p->run();
    p->run_baseline();
    p->run();
    const bool kl = c->name() == "indexer_kl";
    const hal::HostTensor g = p->download(kl ? "dqi" : "dq"), lse = p->download("lse");
    EXPECT_TRUE(all_finite(g));
    EXPECT_TRUE(all_finite(lse));  // every row of these shapes attends some token
    double energy = 0;
    for (int64_t i = 0; i < g.numel(); ++i) energy += std::fabs(g.get(static_cast<size_t>(i)));
    EXPECT_GT(energy, 0.0);
  }
}

TEST(DeviceIo, TiledInputsRepeatTheirTile) {
  auto dev = hal::create_device("cpu-ref");
  Slot s;
  s.name = "x";
  s.dtype = hal::DType::f32;
  s.shape = {1001};
  s.tiled = true;
  s.host = hal::HostTensor(hal::DType::f32, {7});
  for (int i = 0; i < 7; ++i) s.host.set(static_cast<size_t>(i), 1.5f + static_cast<float>(i));
  const DeviceSlot d = upload_slot(*dev, s, false);
  std::vector<float> got(1001);
  dev->stream().download(got.data(), d.tensor);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 1.5f + static_cast<float>(i % 7)) << i;
}

TEST(DeviceIo, OutputsArePoisonedAndGuarded) {
  auto dev = hal::create_device("cpu-ref");
  const Slot f = Slot::output("y", hal::DType::bf16, {3, 5}, Compare::out(hal::DType::bf16));
  const Slot i = Slot::output("idx", hal::DType::i32, {4}, Compare::exact());
  for (const Slot* s : {&f, &i}) {
    const DeviceSlot d = upload_slot(*dev, *s, true);
    const std::vector<uint8_t> raw = download_raw(*dev, d);
    EXPECT_EQ(verify_raw(*s, d, raw), "");
    const hal::HostTensor t = payload(*s, raw);
    if (s->dtype == hal::DType::i32) {
      for (int k = 0; k < 4; ++k) EXPECT_NE(t.data<int32_t>()[k], -1);  // -1 is a valid padding
    } else {
      for (int64_t k = 0; k < t.numel(); ++k) EXPECT_TRUE(std::isnan(t.get(static_cast<size_t>(k))));
    }
    // A write one byte past the end is reported.
    std::vector<uint8_t> bad = raw;
    bad[kGuardFront + s->nbytes()] ^= 1;
    EXPECT_NE(verify_raw(*s, d, bad).find("after"), std::string::npos);
  }
}

}  // namespace
}  // namespace msa::cases
