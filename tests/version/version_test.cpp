// msa::version(): the CMake project VERSION as MAJOR.MINOR.PATCH, and CHANGELOG.md's newest
// entry names it (a version bump without a changelog entry fails here).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "msa/msa.h"

namespace {

TEST(Version, IsTheProjectVersion) {
  EXPECT_STREQ(msa::version(), MSA_TEST_PROJECT_VERSION);
  EXPECT_TRUE(std::regex_match(msa::version(), std::regex(R"(\d+\.\d+\.\d+)"))) << msa::version();
}

TEST(Version, NewestChangelogEntryNamesIt) {
  std::ifstream f(MSA_TEST_CHANGELOG);
  ASSERT_TRUE(f) << "cannot open " << MSA_TEST_CHANGELOG;
  const std::regex entry(R"(## \[([^\]]+)\].*)");
  std::string line;
  std::smatch m;
  while (std::getline(f, line))
    if (std::regex_match(line, m, entry)) {
      EXPECT_EQ(m[1].str(), msa::version()) << "the newest entry of " << MSA_TEST_CHANGELOG;
      return;
    }
  FAIL() << MSA_TEST_CHANGELOG << " has no '## [<version>]' entry";
}

}  // namespace
