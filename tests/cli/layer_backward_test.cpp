// `msa layer --backward` on the cpu backend at a tiny shape: it runs, prints every op and
// both layer sums, matches cpu-ref (--check), records consistent figures in its JSON, and
// rejects arguments it cannot honour with exit code 2 and a message naming the argument.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "tests/cli/cli_util.h"

namespace {

using namespace msa::test::cli;

const std::string kTiny =
    " --backend cpu --config Hq=4 --config Hkv=2 --config Hi=2 --config D=32 --config Di=32 --config Bs=16"
    " --config k=4";
const std::string kShort = kTiny + " --context 256 --iters 2";

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

const nlohmann::json& op_row(const nlohmann::json& j, const std::string& op) {
  for (const auto& r : j.at("ops"))
    if (r.at("op") == op) return r;
  ADD_FAILURE() << "no row " << op;
  return j;
}

TEST(CliLayerBackward, RunsPrintsEveryOpAndMatchesCpuRef) {
  for (const char* sel : {"random", "correlated"}) {
    SCOPED_TRACE(sel);
    const std::string json = (temp_dir() / (std::string("layer_backward_") + sel + ".json")).string();
    const Result r = run_cli("layer --backward" + kShort + " --selection " + sel + " --check --json " + json);
    ASSERT_EQ(r.code, 0) << r.output;
    for (const char* op :
         {"indexer_score", "block_topk", "sparse_block_attention ", "sparse_block_attention_backward",
          "indexer_kl (sparse, dkl=1)", "msa layer fwd+bwd", "dense_attention ", "dense_attention_backward",
          "dense layer fwd+bwd", "ceiling: ", "TFLOP/s", "sparse/dense fwd+bwd time ratio"})
      EXPECT_NE(r.output.find(op), std::string::npos) << op << "\n" << r.output;
    EXPECT_NE(r.output.find("check vs cpu-ref: block_topk identical"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("OVER"), std::string::npos) << r.output;

    const nlohmann::json j = read_json(json);
    EXPECT_EQ(j.at("mode"), "backward");
    EXPECT_EQ(j.at("selection"), sel);
    EXPECT_EQ(j.at("context"), 256);
    EXPECT_EQ(j.at("q_len"), 256);
    EXPECT_EQ(j.at("config").at("n_sink"), 1);  // the sink block, as bench_training.py forces it
    ASSERT_EQ(j.at("ops").size(), 9u);
    double msa = 0, dense = 0;
    for (const char* op : {"indexer_score", "block_topk", "sparse_block_attention", "sparse_block_attention_backward",
                           "indexer_kl (sparse, dkl=1)"})
      msa += op_row(j, op).at("ms").get<double>();
    for (const char* op : {"dense_attention", "dense_attention_backward"})
      dense += op_row(j, op).at("ms").get<double>();
    EXPECT_NEAR(j.at("layer_ms").get<double>(), msa, 1e-9);
    EXPECT_NEAR(j.at("dense_layer_ms").get<double>(), dense, 1e-9);
    // FLOP counts: the backward is 2.5x its forward; sparse attends at most k*Bs = 64 keys
    // per query and head, dense every causal one (mean 128.5 at L = 256).
    const double fwd = op_row(j, "sparse_block_attention").at("flops").get<double>();
    EXPECT_DOUBLE_EQ(op_row(j, "sparse_block_attention_backward").at("flops").get<double>(), 2.5 * fwd);
    EXPECT_DOUBLE_EQ(op_row(j, "dense_attention").at("flops").get<double>(), 4.0 * 4 * 32 * (256.0 * 257 / 2));
    const double mean_keys = j.at("mean_keys").get<double>();
    EXPECT_GT(mean_keys, 16.0);
    EXPECT_LE(mean_keys, 64.0);
    EXPECT_DOUBLE_EQ(fwd, 4.0 * 2 * 32 * mean_keys * 256 * 2);  // 4 * (Hq/Hs) * D * keys
    const auto& bwd = op_row(j, "sparse_block_attention_backward");
    EXPECT_NEAR(bwd.at("tflops").get<double>(), bwd.at("flops").get<double>() / bwd.at("ms").get<double>() / 1e9, 1e-9);
    EXPECT_GT(j.at("ceiling_tflops").get<double>(), 0.0);
    EXPECT_TRUE(bwd.contains("frac_of_ceiling"));
  }
}

// Correlated selections share most blocks between adjacent queries; random ones far fewer.
TEST(CliLayerBackward, CorrelatedSelectionsOverlapMore) {
  double overlap[2];
  int i = 0;
  for (const char* sel : {"random", "correlated"}) {
    const std::string json = (temp_dir() / (std::string("layer_backward_overlap_") + sel + ".json")).string();
    const Result r =
        run_cli("layer --backward" + kTiny + " --context 1024 --iters 1 --selection " + sel + " --json " + json);
    ASSERT_EQ(r.code, 0) << r.output;
    overlap[i++] = read_json(json).at("adjacent_overlap").get<double>();
  }
  EXPECT_GT(overlap[1], 0.9);
  EXPECT_LT(overlap[0], 0.8);
}

void expect_rejected(const std::string& args, const std::string& names) {
  const Result r = run_cli(args);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(names), std::string::npos) << args << "\n" << r.output;
}

TEST(CliLayerBackward, RejectsBadArgumentsNamingThem) {
  expect_rejected("layer --backward" + kShort + " --selection drifting", "argument '--selection': 'drifting'");
  expect_rejected("layer" + kShort + " --selection correlated", "argument '--selection': only with --backward");
  expect_rejected("layer --backward" + kShort + " --batch 2", "argument '--batch'");
  expect_rejected("layer --backward" + kShort + " --q-len 1", "argument '--q-len'");
  expect_rejected("layer --backward" + kShort + " --gpus 2", "argument '--gpus'");
  expect_rejected("layer --backward" + kShort + " --config ki_dtype=fp8_e4m3", "argument '--config ki_dtype'");
  expect_rejected("layer --backward" + kShort + " --config Qb=64", "argument '--config k'");
  expect_rejected("layer --backward" + kTiny + " --context 256 --iters 0", "argument '--iters'");
  // An explicit --q-len equal to the context and --batch 1 are what --backward runs anyway.
  const Result ok = run_cli("layer --backward" + kTiny + " --context 256 --iters 1 --batch 1 --q-len 256");
  EXPECT_EQ(ok.code, 0) << ok.output;
}

}  // namespace
