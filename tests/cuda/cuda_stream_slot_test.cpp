// Kernels with per-stream device state (split top-k and split-KV decode arrival counters)
// index it by the stream's counter slot. A destroyed stream must give its slot back, or a
// process that creates more streams than the kernels' tables hold (8) would silently run
// the slower stateless kernels on every later stream. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/graph.h"
#include "hal/registry.h"
#include "tests/common/no_cuda_device.h"

namespace msa {
namespace {

constexpr int kKernelSlots = 8;  // the smallest per-stream table of a kernel

TEST(CudaStreamSlots, DestroyedStreamsGiveTheirSlotsBack) {
  if (std::string why = test::no_cuda_device(); !why.empty()) GTEST_SKIP() << why;
  auto dev = hal::create_device("cuda:0");
  const cuda::DeviceProps props = cuda::stream_of(*dev).props();
  for (int i = 0; i < 100; ++i) {
    cuda::Stream s("cuda:0", props);
    ASSERT_GE(s.counter_slot(), 0) << "stream " << i;
    ASSERT_LT(s.counter_slot(), kKernelSlots) << "stream " << i << ": earlier streams kept their slots";
  }
}

TEST(CudaStreamSlots, LiveStreamsHoldDistinctSlots) {
  if (std::string why = test::no_cuda_device(); !why.empty()) GTEST_SKIP() << why;
  auto dev = hal::create_device("cuda:0");
  const cuda::DeviceProps props = cuda::stream_of(*dev).props();
  std::set<int> slots = {cuda::stream_of(*dev).counter_slot()};
  std::vector<std::unique_ptr<cuda::Stream>> alive;
  for (int i = 0; i < 2 * kKernelSlots; ++i) {
    alive.push_back(std::make_unique<cuda::Stream>("cuda:0", props));
    EXPECT_TRUE(slots.insert(alive.back()->counter_slot()).second) << "slot " << alive.back()->counter_slot();
  }
  EXPECT_EQ(*slots.begin(), 0);  // lowest free first: the first streams get the kernels' slots
}

}  // namespace
}  // namespace msa
