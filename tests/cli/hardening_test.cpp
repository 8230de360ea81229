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
  const std::string header =
      R"({"x":{"dtype":"F32","data_offsets":[0,4],"shape":)" + std::string(depth, '[') + std::string(depth, ']') + "}}";
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
  const Result ranks = run_cli(
      "layer --backend cpu-ref --gpus 1000 --parallel context --context 64 --iters 1 "
      "--config Hq=2 --config Hkv=1 --config Hi=1 --config D=8 --config Di=8 "
      "--config Bs=8 --config k=2",
      "ulimit -v 2000000; ");
  if (ranks.output.find("Sanitizer") != std::string::npos)  // its shadow memory needs more address space
    GTEST_SKIP() << "a sanitizer runtime cannot start under ulimit -v";
  expect_exit2(ranks, "--gpus");
}

// Class 2: the --in file is never the --out file; concurrent runs on one --out leave one
// run's whole output; init-weights replaces a model folder whole and refuses a folder
// holding anything else.
TEST(CliHardening, WritesReplaceFilesWhole) {
  const std::string in = write("same.safetensors", {{"x", rnd(DType::f32, {3, 8}, 1)}});
  const std::string before = slurp(in);
  expect_exit2(run_cli("op gelu --backend cpu-ref --in " + in + " --out " + in), "argument '--out'");
  EXPECT_EQ(slurp(in), before);

  // Four runs with different inputs race on one --out: the file is one run's output.
  std::vector<std::string> expected;
  std::string race;
  const std::string out = (temp_dir() / "race.safetensors").string();
  for (int i = 0; i < 4; ++i) {
    const std::string f =
        write("race_in" + std::to_string(i) + ".safetensors", {{"x", rnd(DType::f32, {256, 256}, 10 + i)}});
    const std::string alone = (temp_dir() / ("race_alone" + std::to_string(i))).string();
    ASSERT_EQ(run_cli("op gelu --backend cpu-ref --in " + f + " --out " + alone).code, 0);
    expected.push_back(slurp(alone));
    race += std::string(MSA_CLI_PATH) + " op gelu --backend cpu-ref --in " + f + " --out " + out + " & ";
  }
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(std::system((race + "wait").c_str()), 0);
    const std::string got = slurp(out);
    EXPECT_TRUE(got == expected[0] || got == expected[1] || got == expected[2] || got == expected[3])
        << "round " << round << ": the output mixes runs";
  }

  const fs::path model = temp_dir() / "model";
  fs::remove_all(model);
  ASSERT_EQ(run_cli("init-weights " + model.string() + " --seed 1").code, 0);
  fs::copy_file(model / "model.safetensors", model / "model-00002-of-00002.safetensors");  // a stale shard
  ASSERT_EQ(run_cli("init-weights " + model.string() + " --seed 2").code, 0);
  EXPECT_FALSE(fs::exists(model / "model-00002-of-00002.safetensors"));
  const Result r = run_cli("run --backend cpu-ref --quiet --gen 1 --prompt-tokens 4 --model " + model.string());
  EXPECT_EQ(r.code, 0) << r.output;
  for (const auto& e : fs::directory_iterator(temp_dir()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();

  const fs::path home = temp_dir() / "not_a_model";
  fs::create_directories(home);
  std::ofstream(home / "notes.txt") << "keep";
  expect_exit2(run_cli("init-weights " + home.string()), "argument 'DIR'");
  EXPECT_EQ(slurp(home / "notes.txt"), "keep");
  EXPECT_FALSE(fs::exists(home / "config.json"));
}

// Class 3: a write that fails (a full device) is an error, never exit 0.
TEST(CliHardening, FailedWritesExit2) {
  const std::string in = write("full_in.safetensors", {{"x", rnd(DType::f32, {3, 8}, 1)}});
  expect_exit2(run_cli("op gelu --backend cpu-ref --in " + in + " --out /dev/full"), "/dev/full");
  expect_exit2(run_cli("layer --backend cpu-ref --context 64 --iters 1 --config Hq=2 --config Hkv=1 --config Hi=1 "
                       "--config D=8 --config Di=8 --config Bs=8 --config k=2 --json /dev/full"),
               "argument '--json'");
  const fs::path err = temp_dir() / "stderr.txt";
  const int status = std::system((std::string(MSA_CLI_PATH) + " devices > /dev/full 2> " + err.string()).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(slurp(err).find("standard output"), std::string::npos) << slurp(err);
}

const char* kTinyLayer =
    "layer --backend cpu-ref --iters 1 --config Hq=2 --config Hkv=1 --config Hi=1 --config D=8 --config Di=8 "
    "--config Bs=8 --config k=2 ";

// Class 4: sizes that come from parameters or files are checked before anything of that
// size is allocated, and name the argument (exit 2, never bad_alloc's exit 3).
TEST(CliHardening, HugeSizesAreCheckedBeforeAllocating) {
  Tensors topk;
  topk["block_score"] = rnd(DType::f32, {2, 2, 2}, 13);
  topk["kv_len"] = ints({2}, {13, 9}), topk["cu_q"] = ints({3}, {0, 1, 2});
  const std::string in = write("topk_in.safetensors", topk), out = (temp_dir() / "topk_out").string();
  for (const char* k : {"2147483647", "100000000", "3"})
    expect_exit2(run_cli("op block_topk --backend cpu-ref --in " + in + " --out " + out + " -p Bs=8 -p k=" + k),
                 "argument '--param k'");
  EXPECT_EQ(run_cli("op block_topk --backend cpu-ref --in " + in + " --out " + out + " -p Bs=8 -p k=2").code, 0);
  // NQ and cu_q size the output rows: they must agree with the inputs first.
  expect_exit2(run_cli("op block_topk --backend cpu-ref --in " + in + " --out " + out + " -p Bs=8 -p k=2 -p NQ=-1"),
               "argument '--param NQ': is -1 but cu_q, kv_len and Qb give 2");
  expect_exit2(
      run_cli("op block_topk --backend cpu-ref --in " + in + " --out " + out + " -p Bs=8 -p k=2 -p NQ=2000000000"),
      "argument '--param NQ'");
  topk["kv_len"] = ints({2}, {2147483647, 9}), topk["cu_q"] = ints({3}, {0, 2147483646, 2147483647});
  expect_exit2(run_cli("op block_topk --backend cpu-ref --in " + write("topk_cu.safetensors", topk) + " --out " + out +
                       " -p Bs=8 -p k=2"),
               "argument 'cu_q'");

  expect_exit2(run_cli("run --backend cpu-ref --quiet --video 8,2147483647,2147483647"), "argument '--video'");
  expect_exit2(run_cli("run --backend cpu-ref --quiet --prompt-tokens 2000000000"), "argument '--prompt-tokens'");
  expect_exit2(run_cli(std::string(kTinyLayer) + "--batch 100000 --context 1073741824"), "argument '--context'");

  const fs::path model = temp_dir() / "layers_model";
  fs::remove_all(model);
  ASSERT_EQ(run_cli("init-weights " + model.string()).code, 0);
  nlohmann::json cfg = nlohmann::json::parse(slurp(model / "config.json"));
  cfg["num_hidden_layers"] = 2147483647;
  std::ofstream(model / "config.json") << cfg.dump();
  expect_exit2(run_cli("run --backend cpu-ref --quiet --model " + model.string()), "'num_hidden_layers'");
}

// Class 5: a float parameter that would change in the conversion to float (1e-50 -> 0,
// which means "default scale") is an error, and 0 is never taken as a user scale.
TEST(CliHardening, LossyFloatParametersAreRejected) {
  const std::string in = write("scale_in.safetensors", paged_inputs(DType::f32)), out = (temp_dir() / "o").string();
  for (const char* bad : {"1e-50", "1e-400", "1e39", "0", "-0"})
    expect_exit2(run_cli("op dense_attention --backend cpu-ref --in " + in + " --out " + out + " -p scale=" + bad),
                 "argument '--param scale'");
  EXPECT_EQ(run_cli("op dense_attention --backend cpu-ref --in " + in + " --out " + out + " -p scale=1e-30").code, 0);
  const std::string x =
      write("eps_in.safetensors", {{"x", rnd(DType::f32, {3, 8}, 1)}, {"w", rnd(DType::f32, {8}, 2)}});
  expect_exit2(run_cli("op rms_norm --backend cpu-ref --in " + x + " --out " + out + " -p eps=1e-50"),
               "argument '--param eps'");
}

// Class 7: --gpus 0, --seed -1 and a repeated --config field are errors; NaN weights make
// `msa run` say that the logits are not finite.
TEST(CliHardening, SmallerArgumentRules) {
  expect_exit2(run_cli(std::string(kTinyLayer) + "--context 64 --gpus 0"), "--gpus");
  expect_exit2(run_cli("run --backend cpu-ref --quiet --gpus 0"), "--gpus");
  expect_exit2(run_cli("run --backend cpu-ref --quiet --seed -1"), "--seed");
  expect_exit2(run_cli("init-weights " + (temp_dir() / "seed_model").string() + " --seed -1"), "--seed");
  expect_exit2(run_cli(std::string(kTinyLayer) + "--context 64 --config k=4"), "argument '--config': 'k' given twice");

  const fs::path model = temp_dir() / "nan_model";
  fs::remove_all(model);
  ASSERT_EQ(run_cli("init-weights " + model.string()).code, 0);
  Tensors w = msa::hal::read_safetensors((model / "model.safetensors").string());
  HostTensor& norm = w.at("model.norm.weight");
  for (int64_t i = 0; i < norm.numel(); ++i) norm.set(i, std::nanf(""));
  msa::hal::write_safetensors((model / "model.safetensors").string(), w);
  const Result r = run_cli("run --backend cpu-ref --quiet --gen 2 --prompt-tokens 8 --model " + model.string());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("logits of step 0 are not finite"), std::string::npos) << r.output;
}

}  // namespace
