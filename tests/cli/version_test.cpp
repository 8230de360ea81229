// `msa --version` prints the loaded library's msa::version() and exits 0, without a
// subcommand.
#include <gtest/gtest.h>

#include <string>

#include "hal/version.h"
#include "tests/cli/cli_util.h"

namespace {

using namespace msa::test::cli;

TEST(Cli, VersionPrintsLibraryVersion) {
  const Result r = run_cli("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, std::string("msa ") + msa::version() + "\n");
}

}  // namespace
