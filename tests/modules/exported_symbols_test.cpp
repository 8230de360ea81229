// What the shared objects export (nm -D): libmsa only msa's API (hidden visibility, MSA_API),
// none of a backend's own namespace (msa::cpu::, msa::vulkan::, ...); a backend module its
// entry point, and no function of its backend.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "hal/module_loader.h"
#include "hal/registry.h"

namespace msa {
namespace {

// The demangled names of the dynamic symbols `file` defines ("" names a failure to run nm).
std::vector<std::string> exported(const std::string& file) {
  std::vector<std::string> names;
  std::FILE* p = popen((std::string(MSA_TEST_NM) + " -DC --defined-only '" + file + "' 2>&1").c_str(), "r");
  if (p == nullptr) return {""};
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    std::string line(buf);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    const size_t type = line.find(' ');  // "<address> <type> <name>"
    names.push_back(type == std::string::npos || type + 3 > line.size() ? line : line.substr(type + 3));
  }
  if (pclose(p) != 0) return {""};
  return names;
}

bool starts(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

const char* const kBackendNamespaces[] = {"msa::cpu::", "msa::cpu_ref::", "msa::vulkan::", "msa::cuda::", "msa::hip::"};

TEST(ExportedSymbols, LibmsaExportsMsaApiOnly) {
  const auto names = exported(MSA_TEST_LIBMSA);
  ASSERT_FALSE(names.empty());
  ASSERT_NE(names[0], "") << "nm failed on " << MSA_TEST_LIBMSA;
  bool version = false;
  for (const auto& n : names) {
    const bool msa = starts(n, "msa::") || starts(n, "typeinfo for msa::") || starts(n, "typeinfo name for msa::") ||
                     starts(n, "vtable for msa::");
    EXPECT_TRUE(msa) << n;
    for (const char* ns : kBackendNamespaces) EXPECT_EQ(n.find(ns), std::string::npos) << n;
    version = version || starts(n, "msa::version()");
  }
  EXPECT_TRUE(version) << "msa::version() is not exported";
  // The public API is about two hundred symbols; everything msa-internal was ~900.
  EXPECT_LT(names.size(), 400u);
}

TEST(ExportedSymbols, ModulesExportTheirEntryNotTheirBackend) {
  int built = 0;
  for (const auto& s : hal::list_backends()) {
    if ((s.name != "cuda" && s.name != "hip") || !s.compiled) continue;
    ++built;
    const std::string file = hal::libmsa_dir() + "/libmsa_backend_" + s.name + ".so";
    const auto names = exported(file);
    ASSERT_FALSE(names.empty());
    ASSERT_NE(names[0], "") << "nm failed on " << file;
    bool entry = false;
    for (const auto& n : names) {
      entry = entry || n == MSA_BACKEND_MODULE_ENTRY;
      EXPECT_FALSE(starts(n, "msa::" + s.name + "::")) << file << " exports " << n;
    }
    EXPECT_TRUE(entry) << file << " does not export " << MSA_BACKEND_MODULE_ENTRY;
  }
  if (built == 0) GTEST_SKIP() << "this build makes no backend module (configure with MSA_CUDA=ON or MSA_HIP=ON)";
}

}  // namespace
}  // namespace msa
