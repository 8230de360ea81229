// hal::AtomicFile and replace_dir: the old content survives an interrupted or failed
// write, every failed write is an msa::Error, and no temporary file is left behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "hal/atomic_file.h"
#include "hal/error.h"

namespace msa::test {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("msa_atomic_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

// A write that never commits (a kill, an exception) leaves the old file as it was.
TEST_F(AtomicFileTest, UncommittedWriteKeepsTheOldFile) {
  const fs::path p = dir_ / "f.bin";
  hal::write_file_atomic(p.string(), "old");
  {
    hal::AtomicFile f(p.string());
    f.write(std::string(1 << 20, 'x'));
    EXPECT_EQ(read(p), "old");  // nothing visible before commit
  }
  EXPECT_EQ(read(p), "old");
  EXPECT_EQ(entries(), 1u);  // the temporary file is gone
  hal::write_file_atomic(p.string(), "new");
  EXPECT_EQ(read(p), "new");
  EXPECT_EQ(entries(), 1u);
}

// /dev/full accepts the open and fails the write: an error, never a silent success.
TEST_F(AtomicFileTest, FailedWritesAreErrors) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    hal::write_file_atomic("/dev/full", std::string(1 << 16, 'x'), "argument '--json'");
    ADD_FAILURE() << "no error writing /dev/full";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("argument '--json': cannot write '/dev/full'"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));  // written directly, never replaced
  EXPECT_THROW(hal::write_file_atomic((dir_ / "no" / "such" / "f").string(), "x"), Error);
}

// A symlink keeps pointing at its target, which gets the new content.
TEST_F(AtomicFileTest, SymlinkTargetIsReplaced) {
  hal::write_file_atomic((dir_ / "target").string(), "old");
  fs::create_symlink(dir_ / "target", dir_ / "link");
  hal::write_file_atomic((dir_ / "link").string(), "new");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_EQ(read(dir_ / "target"), "new");
}

// A folder is swapped whole: the old files (a stale shard) go with the old folder.
TEST_F(AtomicFileTest, FolderIsReplacedWhole) {
  const fs::path model = dir_ / "model";
  fs::create_directories(model);
  hal::write_file_atomic((model / "a").string(), "old");
  hal::write_file_atomic((model / "stale").string(), "old");
  const std::string staged = hal::make_temp_dir_beside(model.string());
  hal::write_file_atomic((fs::path(staged) / "a").string(), "new");
  hal::replace_dir(staged, model.string());
  EXPECT_EQ(read(model / "a"), "new");
  EXPECT_FALSE(fs::exists(model / "stale"));
  EXPECT_EQ(entries(), 1u);  // no staged or old folder left beside it
  const std::string fresh = hal::make_temp_dir_beside((dir_ / "new_model").string());
  hal::replace_dir(fresh, (dir_ / "new_model").string());
  EXPECT_TRUE(fs::is_directory(dir_ / "new_model"));
}

}  // namespace
}  // namespace msa::test
