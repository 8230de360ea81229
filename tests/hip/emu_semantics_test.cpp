// The CPU emulation itself (tests/hip/emu/warp_emu.h), at waves 32 and 64: shuffles and
// ballots follow HIP's rules (checked against plain loops over lanes), lanes that do not
// exist read as poison, and kernels a GPU would hang or misbehave on are reported instead
// of passing. The other tests trust the emulation only as far as these checks go.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/hip/emu/warp_emu.h"

namespace {

using msa_emu::LaunchCfg;

int tid() { return static_cast<int>(msa_emu::thread_idx().x); }

// Runs `body` on one block of `threads` threads with waves of `warp` lanes.
template <typename F>
void run(int warp, int threads, F body) {
  msa_emu::launch(warp, LaunchCfg(dim3(1), dim3(static_cast<unsigned>(threads))), body);
}

class Semantics : public ::testing::TestWithParam<int> {
 protected:
  int W() const { return GetParam(); }
};

TEST_P(Semantics, LaneAndWaveNumbering) {
  std::vector<int> lane(256), wave(256);
  run(W(), 256, [&] {
    lane[tid()] = msa_emu::lane_id();
    wave[tid()] = msa_emu::warp_width();
  });
  for (int t = 0; t < 256; ++t) {
    EXPECT_EQ(lane[t], t % W());
    EXPECT_EQ(wave[t], W());
  }
}

// Every mode and width against the rule written as a loop over lanes.
TEST_P(Semantics, ShufflesFollowHipRules) {
  const int threads = 2 * W();
  for (int mode : {msa_emu::kIdx, msa_emu::kXor, msa_emu::kUp, msa_emu::kDown}) {
    for (int width = 1; width <= W(); width *= 2) {
      for (int arg : {0, 1, 3, width / 2, width - 1, width + 5}) {
        std::vector<int> got(threads);
        run(W(), threads, [&] {
          got[tid()] = msa_emu::shfl(mode, 1000 + tid(), mode == msa_emu::kIdx ? (tid() * 7 + arg) : arg, width);
        });
        for (int t = 0; t < threads; ++t) {
          const int lane = t % W(), base = t - lane, seg = lane - lane % width;
          int src = lane;  // out of segment: own value
          if (mode == msa_emu::kIdx) src = seg + (t * 7 + arg) % width;
          if (mode == msa_emu::kXor && (lane ^ arg) < seg + width) src = lane ^ arg;
          if (mode == msa_emu::kUp && lane - arg >= seg) src = lane - arg;
          if (mode == msa_emu::kDown && lane % width + arg < width) src = lane + arg;
          ASSERT_EQ(got[t], 1000 + base + src)
              << "mode " << mode << " width " << width << " arg " << arg << " thread " << t;
        }
      }
    }
  }
}

TEST_P(Semantics, BallotIsOneBitPerLaneOfTheWholeWave) {
  std::vector<unsigned long long> got(2 * W());
  run(W(), 2 * W(), [&] { got[tid()] = msa_emu::ballot(tid() % 3 == 0 || tid() % W() == W() - 1); });
  for (int t = 0; t < 2 * W(); ++t) {
    unsigned long long want = 0;
    const int base = t - t % W();
    for (int l = 0; l < W(); ++l)
      if ((base + l) % 3 == 0 || l == W() - 1) want |= 1ull << l;
    EXPECT_EQ(got[t], want) << t;
  }
  if (W() == 64) {
    EXPECT_NE(got[0] >> 32, 0ull) << "lanes 32..63 must appear in the upper half of the mask";
  }
}

// A partial last wave: reading a lane past the block gives poison, not a plausible value.
TEST_P(Semantics, MissingLanesReadAsPoison) {
  const int threads = W() + W() / 2;
  std::vector<float> got(threads);
  run(W(), threads, [&] { got[tid()] = msa_emu::shfl(msa_emu::kXor, 1.0f, W() / 2, W()); });
  for (int t = 0; t < W(); ++t) EXPECT_EQ(got[t], 1.0f);
  for (int t = W(); t < threads; ++t) EXPECT_TRUE(std::isnan(got[t])) << t;
}

TEST_P(Semantics, SharedMemoryAndBarrier) {
  // Thread t writes slot t, then reads its neighbour's after __syncthreads.
  std::vector<int> got(256);
  run(W(), 256, [&] {
    static int smem[256];
    smem[tid()] = tid() * 3;
    msa_emu::sync_block();
    got[tid()] = smem[(tid() + 1) % 256];
  });
  for (int t = 0; t < 256; ++t) EXPECT_EQ(got[t], ((t + 1) % 256) * 3);
}

// Half a wave at __syncthreads, the other half at a shuffle: hangs on a GPU.
TEST_P(Semantics, DivergentBarrierIsReported) {
  EXPECT_THROW(run(W(), 2 * W(),
                   [&] {
                     if (msa_emu::lane_id() < W() / 2)
                       msa_emu::sync_block();
                     else
                       msa_emu::shfl(msa_emu::kXor, 1, 1, W());
                   }),
               msa_emu::EmuError);
}

// Threads (or whole waves) that exit before a barrier are not waited for, as on AMD
// (s_barrier counts live waves) and NVIDIA since Volta.
TEST_P(Semantics, ExitedThreadsDoNotBlockBarriers) {
  std::vector<int> after(2 * W(), 0);
  run(W(), 2 * W(), [&] {
    if (tid() >= W()) return;
    msa_emu::sync_block();
    after[tid()] = 1;
  });
  for (int t = 0; t < W(); ++t) EXPECT_EQ(after[t], 1);
}

TEST_P(Semantics, ShuffleAfterSomeLanesExitedIsReported) {
  EXPECT_THROW(run(W(), W(),
                   [&] {
                     if (tid() % 2 == 1) return;
                     msa_emu::shfl(msa_emu::kXor, 1, 2, W());
                   }),
               msa_emu::EmuError);
}

TEST_P(Semantics, LanesAtDifferentShufflesAreReported) {
  EXPECT_THROW(run(W(), W(), [&] { msa_emu::shfl(msa_emu::kXor, 1, tid() < 4 ? 1 : 2, W()); }), msa_emu::EmuError);
}

TEST_P(Semantics, WidthBeyondTheWaveIsReported) {
  EXPECT_THROW(run(W(), W(), [&] { msa_emu::shfl(msa_emu::kXor, 1, 1, 2 * W()); }), msa_emu::EmuError);
}

TEST_P(Semantics, BadLaunchConfigurationsAreReported) {
  EXPECT_THROW(run(W(), 2048, [] {}), msa_emu::EmuError);
  EXPECT_THROW(msa_emu::launch(W(), LaunchCfg(dim3(1), dim3(64), 65 * 1024), [] {}), msa_emu::EmuError);
}

TEST_P(Semantics, GridIndices) {
  std::vector<int> hits(3 * 2 * 64, 0);
  msa_emu::launch(W(), LaunchCfg(dim3(3, 2), dim3(64)), [&] {
    const auto& b = msa_emu::block_idx();
    const auto& g = msa_emu::grid_dim();
    EXPECT_EQ(g.x, 3u);
    EXPECT_EQ(g.y, 2u);
    ++hits[(b.y * 3 + b.x) * 64 + msa_emu::thread_idx().x];
  });
  for (int h : hits) EXPECT_EQ(h, 1);
}

INSTANTIATE_TEST_SUITE_P(Wave, Semantics, ::testing::Values(32, 64),
                         [](const auto& info) { return "wave" + std::to_string(info.param); });

}  // namespace
