// The HIP backend as compiled into libmsa: with no AMD GPU (this machine, the CI and the
// H200 machine) it must say so cleanly, in the registry and in `msa devices`; with one,
// its first device must open (which runs the wavefront self-check). Skipped when not
// compiled in.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/registry.h"
#if MSA_TEST_HAVE_HIP
#include "backends/hip/backend.h"
#endif

namespace msa {
namespace {

hal::BackendStatus hip_status() {
  for (const auto& s : hal::list_backends())
    if (s.name == "hip") return s;
  ADD_FAILURE() << "the registry does not list hip";
  return {};
}

TEST(HipBackend, ProbeIsCleanWithoutDevice) {
  const hal::BackendStatus s = hip_status();
  if (!s.compiled) GTEST_SKIP() << "hip " << s.unavailable_reason;
  if (!s.devices.empty()) {
    auto dev = hal::create_device(s.devices[0]);
    EXPECT_EQ(dev->name(), s.devices[0]);
    EXPECT_NE(dev->info().details.find("wave"), std::string::npos) << dev->info().details;
    GTEST_SKIP() << "an AMD GPU is present (" << s.descriptions[0] << "): opened it, nothing more to check here";
  }
  EXPECT_EQ(s.unavailable_reason.rfind("hip: no ", 0), 0u) << s.unavailable_reason;
  try {
    hal::create_device("hip");
    ADD_FAILURE() << "opening hip without a device must throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("hip"), std::string::npos) << m;
    EXPECT_NE(m.find("no device"), std::string::npos) << m;
  }
  // `auto` falls through to another backend.
  EXPECT_NE(hal::create_device("auto")->name().rfind("hip", 0), 0u);
}

#if MSA_TEST_HAVE_HIP
// Every architecture of the build (MSA_HIP_ARCHS: "gfx90a;gfx940" by default, CI builds
// gfx90a only) is usable at wave 64; others are refused by name.
TEST(HipBackend, ArchitectureAndWavefrontChecks) {
  const std::string built = hip::built_archs();  // "gfx90a, gfx940"
  std::vector<std::string> archs;
  for (size_t a = 0; a < built.size();) {
    size_t b = built.find(", ", a);
    if (b == std::string::npos) b = built.size();
    archs.push_back(built.substr(a, b - a));
    a = b + 2;
  }
  ASSERT_FALSE(archs.empty());
  for (const auto& arch : archs) {
    EXPECT_EQ(hip::why_unusable(arch, 64), "") << arch;
    EXPECT_NE(hip::why_unusable(arch, 32).find("wavefront 32"), std::string::npos) << arch;
  }
  EXPECT_NE(hip::why_unusable("gfx1030", 32).find("no code object for gfx1030"), std::string::npos);
  EXPECT_NE(hip::why_unusable("gfx1030", 32).find(built), std::string::npos) << "names what was built";
}
#endif

#ifdef MSA_CLI_PATH
TEST(HipBackend, DevicesCommandShowsIt) {
  const hal::BackendStatus s = hip_status();
  std::FILE* p = popen(MSA_CLI_PATH " devices 2>&1", "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  std::string line;
  for (size_t a = 0; a < out.size();) {
    size_t b = out.find('\n', a);
    if (b == std::string::npos) b = out.size();
    if (out.compare(a, 4, "hip ") == 0) line = out.substr(a, b - a);
    a = b + 1;
  }
  ASSERT_FALSE(line.empty()) << out;
  if (!s.compiled) {
    EXPECT_NE(line.find("not compiled in"), std::string::npos) << line;
  } else if (s.devices.empty()) {
    EXPECT_NE(line.find("yes"), std::string::npos) << line;
    EXPECT_NE(line.find("none: hip: no "), std::string::npos) << line;
  } else {
    EXPECT_NE(line.find(s.devices[0]), std::string::npos) << line;
  }
}
#endif

}  // namespace
}  // namespace msa
