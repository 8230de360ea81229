// `msa devices` with the build's backend modules (cuda, hip): loaded, they report their
// devices or the backend's own reason (cuda: "no CUDA driver/device"); absent or broken
// (MSA_BACKEND_DIR pointing at an empty folder, or at a file that is not a module), the
// command still runs and the backend's line says why. Skipped in a build without modules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hal/registry.h"
#include "tests/cli/cli_util.h"

namespace msa::test::cli {
namespace {

std::vector<std::string> built_modules() {
  std::vector<std::string> names;
  for (const auto& s : hal::list_backends())
    if ((s.name == "cuda" || s.name == "hip") && s.compiled) names.push_back(s.name);
  return names;
}

// The line of `msa devices` for backend `name` ("" when there is none).
std::string line_of(const std::string& out, const std::string& name) {
  for (size_t a = 0; a < out.size();) {
    size_t b = out.find('\n', a);
    if (b == std::string::npos) b = out.size();
    const std::string line = out.substr(a, b - a);
    if (line.rfind(name + " ", 0) == 0) return line;
    a = b + 1;
  }
  return "";
}

TEST(CliModules, DevicesLoadsTheModules) {
  const auto names = built_modules();
  if (names.empty()) GTEST_SKIP() << "this build makes no backend module (configure with MSA_CUDA=ON or MSA_HIP=ON)";
  const Result r = run_cli("devices");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& n : names) {
    const std::string line = line_of(r.output, n);
    EXPECT_NE(line.find(" yes "), std::string::npos) << r.output;
    EXPECT_EQ(line.find("libmsa_backend_"), std::string::npos) << "the module did not load: " << line;
    if (n == "cuda" && line.find("cuda:0") == std::string::npos)
      EXPECT_NE(line.find("none: no CUDA driver/device"), std::string::npos) << line;
  }
}

TEST(CliModules, DevicesSaysWhyAModuleIsAbsent) {
  const auto names = built_modules();
  if (names.empty()) GTEST_SKIP() << "this build makes no backend module (configure with MSA_CUDA=ON or MSA_HIP=ON)";
  const fs::path empty = temp_dir() / "no_modules";
  fs::create_directories(empty);
  Result r = run_cli("devices", "MSA_BACKEND_DIR=" + empty.string() + " ");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& n : names)
    EXPECT_NE(line_of(r.output, n).find("none: module libmsa_backend_" + n + ".so not found (not in " + empty.string()),
              std::string::npos)
        << r.output;
  const size_t opens = r.output.find(" opens ");
  ASSERT_NE(opens, std::string::npos) << r.output;  // another backend serves
  for (const auto& n : names) EXPECT_NE(r.output.substr(opens + 7, n.size()), n) << r.output;

  const fs::path broken = temp_dir() / "broken_modules";
  fs::create_directories(broken);
  for (const auto& n : names) std::ofstream(broken / ("libmsa_backend_" + n + ".so")) << "not a shared object\n";
  r = run_cli("devices", "MSA_BACKEND_DIR=" + broken.string() + " ");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const auto& n : names) {
    const std::string file = (broken / ("libmsa_backend_" + n + ".so")).string();
    EXPECT_NE(line_of(r.output, n).find("none: cannot load " + file + ": "), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace msa::test::cli
