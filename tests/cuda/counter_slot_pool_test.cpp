// The counter-slot pool behind cuda::Stream::counter_slot (backends/cuda/counter_slots.h):
// per device, lowest free first, given back on release. Pure C++: runs without a GPU.
#include <gtest/gtest.h>

#include "backends/cuda/counter_slots.h"

namespace msa {
namespace {

using Pool = gpu_common::CounterSlotPool<4>;

TEST(CounterSlotPool, EachDeviceHasItsOwnSlots) {
  Pool pool;
  EXPECT_EQ(pool.acquire(0), 0);
  EXPECT_EQ(pool.acquire(0), 1);
  EXPECT_EQ(pool.acquire(1), 0) << "device 1's streams must not be pushed past device 0's";
  EXPECT_EQ(pool.acquire(1), 1);
  EXPECT_EQ(pool.acquire(0), 2);
}

TEST(CounterSlotPool, LowestFreeFirstAndReleasedSlotsComeBack) {
  Pool pool;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(pool.acquire(0), i);
  EXPECT_EQ(pool.acquire(0), -1) << "all taken";
  pool.release(0, 2);
  pool.release(0, 1);
  EXPECT_EQ(pool.acquire(0), 1);
  EXPECT_EQ(pool.acquire(0), 2);
  pool.release(0, -1);  // a stream that never got a slot
  pool.release(0, 7);   // out of range: ignored
  pool.release(1, 0);   // another device's free slot: no effect on device 0
  EXPECT_EQ(pool.acquire(0), -1);
}

}  // namespace
}  // namespace msa
