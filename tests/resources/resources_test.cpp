// Resource errors become msa::Error with a message, and leave the device usable:
// allocations that cannot fit (on every backend with a device), devices that do not
// exist, malformed device names. Run under the asan preset these also show that failed
// allocations and failed opens leak nothing (LeakSanitizer).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"
#include "tests/common/error_of.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;
using msa::hal::Tensor;

const std::vector<std::string> kBackends = {"cpu-ref", "cpu", "cuda", "hip", "vulkan"};

std::string unavailable(const std::string& backend) {
  for (const auto& s : msa::hal::list_backends())
    if (s.name == backend)
      return !s.compiled ? s.unavailable_reason : s.devices.empty() ? "no device: " + s.unavailable_reason : "";
  return "unknown backend";
}

using msa::test::error_of;

// y = a + b on the device: the device still computes correctly.
void expect_device_works(msa::hal::Device& dev) {
  HostTensor a(DType::f32, {3, 5}), b(DType::f32, {3, 5});
  for (int64_t i = 0; i < a.numel(); ++i) a.set(i, 0.25f * i), b.set(i, 1.0f - i);
  auto da = msa::hal::to_device(dev, a), db = msa::hal::to_device(dev, b);
  auto dy = dev.alloc_tensor(DType::f32, {3, 5});
  msa::ops::AddArgs args;
  args.a = da.tensor, args.b = db.tensor, args.y = dy.tensor;
  msa::ops::add(dev, args);
  const HostTensor y = msa::hal::to_host(dev, dy.tensor);
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.get(i), 0.25f * i + (1.0f - i)) << "element " << i;
}

class Resources : public ::testing::TestWithParam<std::string> {};

TEST_P(Resources, AllocationThatCannotFitIsAnError) {
  const std::string backend = GetParam();
  if (const std::string why = unavailable(backend); !why.empty()) GTEST_SKIP() << backend << ": " << why;
  auto dev = msa::hal::create_device(backend);
  for (size_t bytes : {size_t{1} << 62, std::numeric_limits<size_t>::max(), std::numeric_limits<size_t>::max() - 63,
                       size_t{1} << 50}) {
    SCOPED_TRACE("alloc(" + std::to_string(bytes) + ")");
    const std::string msg = error_of([&] { auto b = dev->alloc(bytes); });
    EXPECT_NE(msg, "") << "allocating " << bytes << " bytes succeeded";
    EXPECT_NE(msg.find(backend), std::string::npos) << "message does not name the backend: " << msg;
  }
  // A tensor whose shape needs far more than any device has.
  EXPECT_NE(error_of([&] { auto t = dev->alloc_tensor(DType::f32, {int64_t{1} << 30, int64_t{1} << 30}); }), "");
  expect_device_works(*dev);  // the failures left the device usable
}

// Device copies: disjoint rows of one buffer copy; dst == src is a no-op; partly shared
// bytes or different sizes are errors naming the arguments (device copy engines and shaders
// are undefined on overlap), and the device stays usable.
TEST_P(Resources, OverlappingCopyIsAnErrorDisjointRowsCopy) {
  const std::string backend = GetParam();
  if (const std::string why = unavailable(backend); !why.empty()) GTEST_SKIP() << backend << ": " << why;
  auto dev = msa::hal::create_device(backend);
  HostTensor h(DType::f32, {4, 8});
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, static_cast<float>(i));
  auto d = msa::hal::to_device(*dev, h);
  const Tensor t = d.tensor;
  auto& st = dev->stream();
  st.copy(t.slice_rows(2, 4), t.slice_rows(0, 2));  // disjoint: rows 2-3 <- rows 0-1
  st.copy(t.slice_rows(1, 3), t.slice_rows(1, 3));  // the same range: nothing to do
  const HostTensor r = msa::hal::to_host(*dev, t);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_EQ(r.get(i), static_cast<float>(i));
    EXPECT_EQ(r.get(16 + i), static_cast<float>(i)) << "row copy, element " << i;
  }
  for (const auto& [dst, src] :
       {std::pair{t.slice_rows(1, 3), t.slice_rows(0, 2)}, {t.slice_rows(0, 3), t.slice_rows(1, 4)}}) {
    const std::string msg = error_of([&] { st.copy(dst, src); });
    EXPECT_NE(msg.find("overlap"), std::string::npos) << "overlapping copy: " << msg;
    EXPECT_NE(msg.find("copy: dst"), std::string::npos) << "message does not name the arguments: " << msg;
  }
  const std::string size_msg = error_of([&] { st.copy(t.slice_rows(0, 1), t.slice_rows(1, 3)); });
  EXPECT_NE(size_msg.find("differ in size"), std::string::npos) << size_msg;
  expect_device_works(*dev);
}

INSTANTIATE_TEST_SUITE_P(Backends, Resources, ::testing::ValuesIn(kBackends), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
});

TEST(Devices, AbsentOrMalformedDevicesAreErrorsNamingTheDevice) {
  for (const char* name : {"cuda:7", "hip:7", "vulkan:7", "cpu:1", "cpu-ref:1", "cuda:1234567", "cuda:-1", "cuda:x",
                           "cuda:", "tpu", "tpu:0", "", ":", "cpu-ref:99999"}) {
    SCOPED_TRACE(name);
    const std::string msg = error_of([&] { auto d = msa::hal::create_device(name); });
    EXPECT_NE(msg, "") << "opening '" << name << "' succeeded";
    EXPECT_NE(msg.find("'" + std::string(name) + "'"), std::string::npos) << msg;
  }
}

TEST(Devices, ListingBackendsNeverThrowsAndExplainsAbsence) {
  const auto list = msa::hal::list_backends();
  ASSERT_FALSE(list.empty());
  for (const auto& s : list) {
    SCOPED_TRACE(s.name);
    if (s.devices.empty()) EXPECT_NE(s.unavailable_reason, "") << "no device and no reason";
  }
}

TEST(Devices, AFailedAllocationDoesNotDisturbOtherBuffers) {
  auto dev = msa::hal::create_device("cpu-ref");
  HostTensor h(DType::i32, {64});
  for (int i = 0; i < 64; ++i) h.data<int32_t>()[i] = i * 7;
  auto d = msa::hal::to_device(*dev, h);
  EXPECT_NE(error_of([&] { auto b = dev->alloc(size_t{1} << 62); }), "");
  const HostTensor back = msa::hal::to_host(*dev, d.tensor);
  EXPECT_EQ(back.bytes, h.bytes);
}

}  // namespace
