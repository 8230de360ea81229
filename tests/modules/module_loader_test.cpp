// The backend module loader: a usable module loads and its functions work; each way a
// module can be unusable (absent, not a shared object, a library it needs missing, no
// entry point, another ABI, msa version or backend) gives a reason that names the file
// and the cause, and nothing crashes. Then the build's own modules (cuda, hip), which
// must load from libmsa's folder.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>

#include "hal/module_loader.h"
#include "hal/registry.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

std::string variant(const std::string& v) { return std::string(MSA_TEST_MODULES_DIR) + "/" + v; }

hal::ModuleLoad refused(const std::string& dir) {
  hal::ModuleLoad m = hal::load_backend_module("fake", dir);
  EXPECT_EQ(m.module, nullptr) << "loaded " << m.path;
  EXPECT_FALSE(m.error.empty());
  return m;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ModuleLoader, LoadsAModuleAndCallsIt) {
  const hal::ModuleLoad m = hal::load_backend_module("fake", variant("good"));
  ASSERT_NE(m.module, nullptr) << m.error;
  EXPECT_EQ(m.error, "");
  EXPECT_EQ(m.path, variant("good") + "/libmsa_backend_fake.so");
  EXPECT_STREQ(m.module->name, "fake");
  const hal::BackendStatus s = m.module->probe();
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0], "fake:0");
  auto dev = m.module->open_device(0);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->name(), "cpu-ref");
  // An msa::Error thrown in the module is the msa::Error caught here (one type_info).
  EXPECT_THROW(m.module->open_device(1), Error);
  // Loaded again: the same module.
  EXPECT_EQ(hal::load_backend_module("fake", variant("good")).module, m.module);
}

TEST(ModuleLoader, AbsentFileSaysWhereItLooked) {
  const hal::ModuleLoad m = refused(variant("no-such-folder"));
  EXPECT_TRUE(has(m.error, "module libmsa_backend_fake.so not found")) << m.error;
  EXPECT_TRUE(has(m.error, "not in " + variant("no-such-folder"))) << m.error;
  EXPECT_TRUE(has(m.error, "not on the library search path")) << m.error;
}

TEST(ModuleLoader, FileThatIsNotASharedObject) {
  const fs::path dir = fs::temp_directory_path() / ("msa_module_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "libmsa_backend_fake.so") << "not an ELF file\n";
  const hal::ModuleLoad m = refused(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(has(m.error, "cannot load " + (dir / "libmsa_backend_fake.so").string() + ": ")) << m.error;
}

TEST(ModuleLoader, MissingLibraryIsNamed) {
  const hal::ModuleLoad m = refused(variant("dep"));
  EXPECT_TRUE(has(m.error, "cannot load " + variant("dep") + "/libmsa_backend_fake.so: ")) << m.error;
  EXPECT_TRUE(has(m.error, "libmsa_test_module_needed.so")) << m.error;  // dlerror's text
}

TEST(ModuleLoader, NoEntryPoint) {
  const hal::ModuleLoad m = refused(variant("noentry"));
  EXPECT_TRUE(has(m.error, "is not an msa backend module (no msa_backend_module_v1")) << m.error;
}

TEST(ModuleLoader, OtherAbi) {
  const hal::ModuleLoad m = refused(variant("abi"));
  EXPECT_TRUE(has(m.error, "module ABI 999, libmsa expects " + std::to_string(kMsaBackendModuleAbi))) << m.error;
}

TEST(ModuleLoader, OtherMsaVersion) {
  const hal::ModuleLoad m = refused(variant("version"));
  EXPECT_TRUE(has(m.error, "built for msa 0.0.0-other")) << m.error;
}

TEST(ModuleLoader, OtherBackend) {
  const hal::ModuleLoad m = refused(variant("name"));
  EXPECT_TRUE(has(m.error, "the module of backend 'other', not 'fake'")) << m.error;
}

TEST(ModuleLoader, LibmsaDirIsTheLibrarysFolder) {
  EXPECT_TRUE(fs::equivalent(hal::libmsa_dir(), MSA_TEST_LIBMSA_DIR)) << hal::libmsa_dir();
}

// The build's modules sit beside libmsa and load (this machine has the runtimes they
// were linked against); the registry's reason for them is then the backend's own.
TEST(BuiltModules, LoadFromLibmsasFolder) {
  int built = 0;
  for (const auto& s : hal::list_backends()) {
    if ((s.name != "cuda" && s.name != "hip") || !s.compiled) continue;
    ++built;
    const hal::ModuleLoad m = hal::load_backend_module(s.name, hal::libmsa_dir());
    EXPECT_NE(m.module, nullptr) << m.error;
    EXPECT_EQ(m.path, hal::libmsa_dir() + "/libmsa_backend_" + s.name + ".so");
    EXPECT_FALSE(has(s.unavailable_reason, "libmsa_backend_")) << s.unavailable_reason;
  }
  if (built == 0) GTEST_SKIP() << "this build makes no backend module (configure with MSA_CUDA=ON or MSA_HIP=ON)";
}

}  // namespace
}  // namespace msa
