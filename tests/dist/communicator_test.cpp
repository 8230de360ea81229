// dist::World and its communicators: host groups on cpu-ref with 1-4 ranks (CI), NCCL on
// the CUDA devices present (skipped without them). Every collective is checked against
// values each rank can compute on its own.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "dist/world.h"
#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"

namespace msa::dist {
namespace {

int cuda_devices() {
  for (const auto& b : hal::list_backends())
    if (b.name == "cuda") return static_cast<int>(b.devices.size());
  return 0;
}

// all_reduce of f32 and bf16, all_gather, all_to_all with per-pair sizes, on `world` ranks.
void exercise(const std::string& backend, int world) {
  World w(backend, world);
  ASSERT_EQ(w.size(), world);
  std::atomic<int> checked{0};
  w.run([&](Communicator& c) {
    hal::Device& d = c.device();
    const int r = c.rank(), n = 1000;
    // all_reduce_sum f32: rank r contributes (r + 1) * i.
    hal::HostTensor x(hal::DType::f32, {n});
    for (int i = 0; i < n; ++i) x.set(i, static_cast<float>((r + 1) * i));
    auto dx = hal::to_device(d, x);
    c.all_reduce_sum(dx.tensor);
    const hal::HostTensor sx = hal::to_host(d, dx.tensor);
    const float f = static_cast<float>(world * (world + 1) / 2);
    for (int i = 0; i < n; ++i) ASSERT_EQ(sx.get(i), f * i) << "rank " << r << " i " << i;
    // bf16: small integers are exact.
    hal::HostTensor y(hal::DType::bf16, {64});
    for (int i = 0; i < 64; ++i) y.set(i, static_cast<float>(r + i % 4));
    auto dy = hal::to_device(d, y);
    c.all_reduce_sum(dy.tensor);
    const hal::HostTensor sy = hal::to_host(d, dy.tensor);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(sy.get(i), static_cast<float>(world * (world - 1) / 2 + world * (i % 4)));
    // all_gather through all_gather_ints.
    const std::vector<int32_t> mine{r, 10 * r, -r};
    const std::vector<int32_t> all = all_gather_ints(c, mine);
    ASSERT_EQ(all.size(), static_cast<size_t>(3 * world));
    for (int p = 0; p < world; ++p) {
      EXPECT_EQ(all[3 * p], p);
      EXPECT_EQ(all[3 * p + 1], 10 * p);
      EXPECT_EQ(all[3 * p + 2], -p);
    }
    // all_to_all: rank r sends r + p + 1 ints of value 100 r + p to rank p.
    std::vector<hal::Device::Owned> so(world), ro(world);
    std::vector<hal::Tensor> send(world), recv(world);
    for (int p = 0; p < world; ++p) {
      if (p == r) continue;
      std::vector<int32_t> v(static_cast<size_t>(r + p + 1), 100 * r + p);
      so[p] = d.alloc_tensor(hal::DType::i32, {r + p + 1});
      d.stream().upload(so[p].tensor, v.data());
      send[p] = so[p].tensor;
      ro[p] = d.alloc_tensor(hal::DType::i32, {p + r + 1});
      recv[p] = ro[p].tensor;
    }
    c.all_to_all(send, recv);
    for (int p = 0; p < world; ++p) {
      if (p == r) continue;
      const hal::HostTensor got = hal::to_host(d, recv[p]);
      for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.data<int32_t>()[i], 100 * p + r);
    }
    ++checked;
  });
  EXPECT_EQ(checked.load(), world);
}

TEST(DistHost, CollectivesOneToFourRanks) {
  for (int world : {1, 2, 3, 4}) {
    SCOPED_TRACE("world " + std::to_string(world));
    exercise("cpu-ref", world);
  }
}

TEST(DistHost, FailingRankDoesNotHangTheOthers) {
  World w("cpu-ref", 3);
  EXPECT_THROW(w.run([&](Communicator& c) {
    if (c.rank() == 1) throw Error("rank 1 fails before the collective");
    auto t = c.device().alloc_tensor(hal::DType::f32, {4});
    c.device().stream().fill_bytes(t.tensor, 0);
    c.all_reduce_sum(t.tensor);  // ranks 0 and 2 wait here until aborted
  }),
               Error);
}

TEST(DistHost, MismatchedSizesAreErrors) {
  World w("cpu-ref", 2);
  try {
    w.run([&](Communicator& c) {
      auto t = c.device().alloc_tensor(hal::DType::f32, {c.rank() == 0 ? 4 : 5});
      c.device().stream().fill_bytes(t.tensor, 0);
      c.all_reduce_sum(t.tensor);
    });
    FAIL() << "expected msa::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce_sum"), std::string::npos) << e.what();
  }
}

TEST(DistWorld, BadArgumentsNameTheFlag) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { World w("cpu-ref", 0); }).find("--gpus"), std::string::npos);
  EXPECT_NE(message([] { World w("cpu-ref:0", 2); }).find("--backend"), std::string::npos);
  EXPECT_NE(message([] { World w("vulkan", 2); }).find("--backend"), std::string::npos);
  EXPECT_NE(message([] { World w("cuda", cuda_devices() + 1); }).find("--gpus"), std::string::npos);
  EXPECT_NE(message([] { world_size_from(-2); }).find("--gpus"), std::string::npos);
  EXPECT_EQ(world_size_from(3), 3);
}

TEST(DistNccl, CollectivesOnEveryGpu) {
  const int n = cuda_devices();
  if (n == 0) GTEST_SKIP() << "no CUDA device here: the NCCL communicator runs on the GPU machine";
  for (int world = 1; world <= n && world <= 4; world *= 2) {
    SCOPED_TRACE("world " + std::to_string(world));
    exercise("cuda", world);
  }
}

}  // namespace
}  // namespace msa::dist
