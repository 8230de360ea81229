// The Vulkan runtime under the ops: probe, transfers at odd offsets and sizes, tensor
// views whose offset is not a multiple of minStorageBufferOffsetAlignment, events, and
// the refusal of bindings larger than maxStorageBufferRange.
#include <cmath>
#include <numeric>

#include "ops/ops.h"
#if MSA_TEST_VULKAN_INTERNALS
#include "backends/vulkan/stream.h"
#endif
#include "tests/vulkan/vk_test_util.h"

namespace msa::vulkan_test {
namespace {

TEST(VulkanProbe, ListsDevicesOrSaysWhyNot) {
  for (const auto& b : hal::list_backends()) {
    if (b.name != "vulkan") continue;
    if (!b.compiled) GTEST_SKIP() << "vulkan backend " << b.unavailable_reason;
    EXPECT_EQ(b.devices.size(), b.descriptions.size());
    if (b.devices.empty()) {
      EXPECT_FALSE(b.unavailable_reason.empty());
    } else {
      EXPECT_EQ(b.devices[0].rfind("vulkan:", 0), 0u) << b.devices[0];
      EXPECT_FALSE(b.descriptions[0].empty());
    }
    return;
  }
  FAIL() << "list_backends() has no vulkan entry";
}

TEST_F(VulkanTest, NameAndInfo) {
  EXPECT_EQ(dev().name().rfind("vulkan:", 0), 0u);
  const hal::DeviceInfo i = dev().info();
  EXPECT_EQ(i.backend, "vulkan");
  EXPECT_FALSE(i.model.empty());
  EXPECT_NE(i.details.find("subgroup"), std::string::npos) << i.details;
}

TEST_F(VulkanTest, TransfersAtOddOffsetsKeepNeighbours) {
  hal::Buffer* b = buffer(1000);
  const hal::Tensor whole(b, DType::fp8_e4m3, {1000});
  std::vector<uint8_t> base(1000);
  std::iota(base.begin(), base.end(), uint8_t{7});
  dev().stream().upload(whole, base.data());

  // Upload 37 bytes at offset 3, fill 13 bytes at offset 101, copy 29 bytes 501 -> 601.
  std::vector<uint8_t> part(37, 0xC3);
  dev().stream().upload(hal::Tensor(b, DType::fp8_e4m3, {37}, 3), part.data());
  dev().stream().fill_bytes(hal::Tensor(b, DType::fp8_e4m3, {13}, 101), 0x5A);
  dev().stream().fill_bytes(hal::Tensor(b, DType::f32, {8}, 200), 0x11);  // aligned path
  dev().stream().copy(hal::Tensor(b, DType::fp8_e4m3, {29}, 601), hal::Tensor(b, DType::fp8_e4m3, {29}, 501));

  std::vector<uint8_t> want = base;
  std::fill(want.begin() + 3, want.begin() + 40, 0xC3);
  std::fill(want.begin() + 101, want.begin() + 114, 0x5A);
  std::fill(want.begin() + 200, want.begin() + 232, 0x11);
  std::copy(want.begin() + 501, want.begin() + 530, want.begin() + 601);
  std::vector<uint8_t> got(1000);
  dev().stream().download(got.data(), whole);
  EXPECT_EQ(got, want);

  std::vector<uint8_t> sub(37);
  dev().stream().download(sub.data(), hal::Tensor(b, DType::fp8_e4m3, {37}, 3));
  EXPECT_EQ(sub, part);
  EXPECT_NO_THROW(dev().stream().synchronize());
}

// Copies of >= 1 MiB with 16-byte aligned offsets and sizes run as a shader (stream_copy.comp);
// the source and destination offsets are not multiples of the binding alignment.
TEST_F(VulkanTest, LargeAlignedCopyRunsAsShaderAndKeepsNeighbours) {
  constexpr size_t kN = (size_t{3} << 20) + 4096;
  constexpr size_t kSrc = 16, kDst = kN + 48, kBytes = (size_t{3} << 20) + 2032;
  hal::Buffer* b = buffer(2 * kN + 64);
  const hal::Tensor whole(b, DType::fp8_e4m3, {static_cast<int64_t>(2 * kN + 64)});
  std::vector<uint8_t> base(2 * kN + 64);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  dev().stream().upload(whole, base.data());
#if MSA_TEST_VULKAN_INTERNALS
  auto& vs = static_cast<vulkan::VulkanStream&>(dev().stream());
  const uint64_t dispatches = vs.shader_copy_dispatches();
#endif
  dev().stream().copy(hal::Tensor(b, DType::fp8_e4m3, {static_cast<int64_t>(kBytes)}, kDst),
                      hal::Tensor(b, DType::fp8_e4m3, {static_cast<int64_t>(kBytes)}, kSrc));
#if MSA_TEST_VULKAN_INTERNALS
  EXPECT_EQ(vs.shader_copy_dispatches(), dispatches + 1) << "the copy did not run as stream_copy.comp";
#endif
  std::vector<uint8_t> want = base;
  std::copy(base.begin() + kSrc, base.begin() + kSrc + kBytes, want.begin() + kDst);
  std::vector<uint8_t> got(base.size());
  dev().stream().download(got.data(), whole);
  EXPECT_TRUE(got == want);
  EXPECT_NO_THROW(dev().stream().synchronize());
}

TEST_F(VulkanTest, ZeroSizeTransfersAndBuffers) {
  hal::Buffer* b = buffer(0);
  const hal::Tensor empty(b, DType::f32, {0});
  EXPECT_NO_THROW(dev().stream().upload(empty, nullptr));
  EXPECT_NO_THROW(dev().stream().fill_bytes(empty, 0));
  EXPECT_NO_THROW(dev().stream().synchronize());
}

// Views at byte offsets that are not multiples of the binding alignment are bound from
// the aligned offset below and indexed with an element offset: results must be exact.
TEST_F(VulkanTest, UnalignedViewsComputeExactly) {
  for (DType t : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(hal::dtype_name(t));
    const int64_t n = 300;
    const size_t es = hal::dtype_size(t);
    std::vector<float> av(n), bv(n);
    for (int64_t i = 0; i < n; ++i) {
      av[i] = hal::round_to(t, std::sin(0.37f * i) * 3.0f);
      bv[i] = hal::round_to(t, std::cos(0.11f * i) * 2.0f);
    }
    hal::Buffer* ab = buffer((n + 1) * es);
    hal::Buffer* bb = buffer((n + 3) * es);
    hal::Buffer* yb = buffer((n + 5) * es);
    hal::HostTensor ah(t, {n}), bh(t, {n});
    for (int64_t i = 0; i < n; ++i) {
      ah.set(i, av[i]);
      bh.set(i, bv[i]);
    }
    ops::AddArgs a;
    a.a = hal::Tensor(ab, t, {n}, 1 * es);
    a.b = hal::Tensor(bb, t, {n}, 3 * es);
    a.y = hal::Tensor(yb, t, {n}, 5 * es);
    dev().stream().upload(a.a, ah.bytes.data());
    dev().stream().upload(a.b, bh.bytes.data());
    dev().stream().fill_bytes(hal::Tensor(yb, DType::fp8_e4m3, {static_cast<int64_t>((n + 5) * es)}), 0xFF);
    ops::add(dev(), a);
    const hal::HostTensor y = hal::to_host(dev(), a.y);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.get(i), hal::round_to(t, av[i] + bv[i])) << "element " << i;
    // The elements before the view were not written.
    std::vector<uint8_t> head(5 * es);
    dev().stream().download(head.data(), hal::Tensor(yb, DType::fp8_e4m3, {static_cast<int64_t>(5 * es)}));
    for (uint8_t v : head) EXPECT_EQ(v, 0xFF);
  }
}

TEST_F(VulkanTest, EventsTimeWork) {
  auto start = dev().create_event();
  auto stop = dev().create_event();
  const int64_t n = 1 << 16;
  std::vector<float> v(n, 1.5f);
  ops::AddArgs a;
  a.a = make(DType::f32, {n}, v);
  a.b = make(DType::f32, {n}, v);
  a.y = out(DType::f32, {n});
  dev().stream().record(*start);
  for (int i = 0; i < 4; ++i) ops::add(dev(), a);
  dev().stream().record(*stop);
  dev().stream().synchronize();
  const double ms = stop->elapsed_ms(*start);
  EXPECT_TRUE(std::isfinite(ms));
  EXPECT_GE(ms, 0.0);
  EXPECT_LT(ms, 60e3);
  EXPECT_EQ(get(a.y)[n - 1], 3.0f);
}

TEST_F(VulkanTest, ManyOpsBetweenSynchronisationsStayOrdered) {
  // More commands than one batch holds: later batches must see earlier results.
  const int64_t n = 1000;
  ops::AddArgs a;
  a.a = make(DType::f32, {n}, std::vector<float>(n, 0.0f));
  a.b = make(DType::f32, {n}, std::vector<float>(n, 1.0f));
  a.y = out(DType::f32, {n});
  for (int i = 0; i < 300; ++i) {
    ops::add(dev(), a);
    dev().stream().copy(a.a, a.y);
  }
  const std::vector<float> y = get(a.a);
  EXPECT_EQ(y[0], 300.0f);
  EXPECT_EQ(y[n - 1], 300.0f);
}

TEST_F(VulkanTest, RefusesBindingsPastMaxStorageBufferRange) {
  // supports() looks at sizes only: a 4 GiB view (never touched) must be refused.
  hal::Buffer* b = buffer(64);
  ops::AddArgs a;
  a.a = hal::Tensor(b, DType::f32, {int64_t{1} << 30});
  a.b = a.a;
  a.y = a.a;
  const std::string why = dev().supports(hal::OpId::add, &a);
  EXPECT_NE(why.find("maxStorageBufferRange"), std::string::npos) << why;
  // And a small one is accepted.
  a.a = hal::Tensor(b, DType::f32, {16});
  a.b = a.a;
  a.y = a.a;
  EXPECT_EQ(dev().supports(hal::OpId::add, &a), "");
}

}  // namespace
}  // namespace msa::vulkan_test
