// The CLI under careless or hostile use (issue 22): deeply nested files, too many ranks,
// interrupted and concurrent writes, full devices, huge sizes, lossy parameters. Each
// gets exit code 2 and a message naming the argument or file, never a signal, exit 3,
// a lost file or a success that did not happen.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "hal/safetensors.h"
#include "tests/cli/cli_util.h"

namespace {

using namespace msa::test::cli;

// A safetensors file whose header nests `depth` arrays (about 2 bytes per level).
std::string deep_file(const std::string& name, int depth) {
  const std::string header = R"({"x":{"dtype":"F32","data_offsets":[0,4],"shape":)" + std::string(depth, '[') +
                             std::string(depth, ']') + "}}";
  const fs::path p = temp_dir() / name;
  std::ofstream f(p, std::ios::binary);
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i)));
  f << header << std::string(4, '\0');
  return p.string();
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void expect_exit2(const Result& r, const std::string& names) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(names), std::string::npos) << r.output;
}

// Class 1: 100k nested levels in a safetensors header or a config.json, and more ranks
// than the host can start threads for.
TEST(CliHardening, DeepNestingAndTooManyRanksExit2) {
  expect_exit2(run_cli("op gelu --backend cpu-ref --in " + deep_file("deep.safetensors", 100000) + " --out " +
                       (temp_dir() / "o").string()),
               "deeper than 64 levels");
  const fs::path model = temp_dir() / "deep_model";
  fs::create_directories(model);
  std::ofstream(model / "config.json") << std::string(100000, '[') << std::string(100000, ']');
  expect_exit2(run_cli("run --backend cpu-ref --quiet --model " + model.string()), "deeper than 64 levels");
  // 1000 ranks need 1000 threads; 2 GB of address space cannot hold their stacks.
  expect_exit2(run_cli("layer --backend cpu-ref --gpus 1000 --parallel context --context 64 --iters 1 "
                       "--config Hq=2 --config Hkv=1 --config Hi=1 --config D=8 --config Di=8 --config Bs=8 "
                       "--config k=2",
                       "ulimit -v 2000000; "),
               "--gpus");
}

}  // namespace
