// The msa CLI: bad input exits with code 2 and a message naming the argument; `msa op`
// round-trips every op through safetensors files, and its result equals the op called
// directly through ops:: (checked for dense_attention).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "hal/registry.h"
#include "hal/safetensors.h"
#include "ops/ops.h"
#include "tests/cli/cli_util.h"

namespace {

using namespace msa::test::cli;

TEST(Cli, UnknownBackendExits2) {
  const Result r = run_cli("devices --backend nope");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown backend"), std::string::npos) << r.output;
}

TEST(Cli, MalformedSafetensorsExits2) {
  const fs::path p = temp_dir() / "bad.safetensors";
  std::ofstream(p, std::ios::binary) << "\xff\xff\xff\xff\xff\xff\xff\x7f{}";
  const Result r = run_cli("op gelu --backend cpu-ref --in " + p.string() + " --out " + (temp_dir() / "o").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.safetensors"), std::string::npos) << r.output;
}

TEST(Cli, WrongShapeNamesArgumentAndExits2) {
  Tensors m = paged_inputs(DType::f32);
  m["q"] = rnd(DType::f32, {2, 3, 16}, 9);  // Hq = 3 is not a multiple of Hkv = 2
  const Result r = run_cli("op dense_attention --backend cpu-ref --in " + write("hq.safetensors", m) + " --out " +
                           (temp_dir() / "o").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("argument 'q'"), std::string::npos) << r.output;
}

TEST(Cli, PageOutOfRangeAndKvLenExit2) {
  Tensors m = paged_inputs(DType::f32);
  m["block_table"] = ints({2, 2}, {3, 0, 7, 1});
  Result r = run_cli("op dense_attention --backend cpu-ref --in " + write("page.safetensors", m) + " --out " +
                     (temp_dir() / "o").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("argument 'block_table'"), std::string::npos) << r.output;
  m = paged_inputs(DType::f32);
  m["cu_q"] = ints({3}, {0, 1, 12});  // 11 queries for kv_len 9
  m["q"] = rnd(DType::f32, {12, 4, 16}, 4);
  r = run_cli("op dense_attention --backend cpu-ref --in " + write("len.safetensors", m) + " --out " +
              (temp_dir() / "o").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("argument 'kv_len'"), std::string::npos) << r.output;
}

TEST(Cli, UnknownParamOrTensorExits2) {
  Tensors m = paged_inputs(DType::f32);
  Result r = run_cli("op dense_attention --backend cpu-ref --in " + write("p.safetensors", m) + " --out " +
                     (temp_dir() / "o").string() + " --param bogus=1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("bogus"), std::string::npos) << r.output;
  m["extra"] = rnd(DType::f32, {2}, 5);
  r = run_cli("op dense_attention --backend cpu-ref --in " + write("e.safetensors", m) + " --out " +
              (temp_dir() / "o").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'extra'"), std::string::npos) << r.output;
  r = run_cli("op no_such_op --backend cpu-ref --in x --out y");
  EXPECT_EQ(r.code, 2) << r.output;
}

TEST(Cli, KSmallerThanForcedExits2) {
  Tensors m;
  m["block_score"] = rnd(DType::f32, {2, 2, 2}, 7);
  m["kv_len"] = ints({2}, {13, 9});
  m["cu_q"] = ints({3}, {0, 1, 2});
  const Result r = run_cli("op block_topk --backend cpu-ref --in " + write("k.safetensors", m) + " --out " +
                           (temp_dir() / "o").string() + " -p Bs=8 -p k=1 -p n_sink=1");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("argument 'k'"), std::string::npos) << r.output;
}

// Each op's inputs and parameters for the round trip.
struct OpCase {
  std::string op;
  Tensors in;
  std::string params;
};

std::vector<OpCase> op_cases() {
  std::vector<OpCase> c;
  Tensors paged = paged_inputs(DType::bf16);
  c.push_back({"dense_attention", paged, ""});
  Tensors sparse = paged;
  sparse["block_idx"] = ints({2, 2, 2}, {0, 1, 0, -1, 1, -1, 0, 1});
  c.push_back({"sparse_block_attention", sparse, ""});
  Tensors idx = paged;
  idx.erase("q"), idx.erase("k_cache"), idx.erase("v_cache");
  idx["qi"] = rnd(DType::bf16, {2, 2, 16}, 11);
  idx["ki_cache"] = rnd(DType::bf16, {4, 8, 16}, 12);
  c.push_back({"indexer_score", idx, "-p pool=lse"});
  Tensors topk;
  topk["block_score"] = rnd(DType::f32, {2, 2, 2}, 13);
  topk["kv_len"] = ints({2}, {13, 9}), topk["cu_q"] = ints({3}, {0, 1, 2});
  c.push_back({"block_topk", topk, "-p Bs=8 -p k=1"});
  Tensors patch;
  patch["q"] = rnd(DType::f32, {12, 2, 64}, 14), patch["k"] = rnd(DType::f32, {12, 2, 64}, 15);
  patch["v"] = rnd(DType::f32, {12, 2, 64}, 16), patch["items"] = ints({2, 3}, {2, 2, 2, 1, 2, 2});
  c.push_back({"patch_attention_3d", patch, "-p window=1"});
  Tensors app = paged;
  app.erase("q");
  app["k"] = rnd(DType::bf16, {2, 2, 16}, 17), app["v"] = rnd(DType::bf16, {2, 2, 16}, 18);
  app["ki"] = rnd(DType::f32, {2, 16}, 19);
  app["ki_cache"] = rnd(DType::fp8_e4m3, {4, 8, 16}, 20), app["ki_scale"] = rnd(DType::f32, {4, 8}, 21);
  c.push_back({"kv_append", app, ""});
  c.push_back(
      {"matmul",
       {{"x", rnd(DType::f32, {3, 8}, 22)}, {"w", rnd(DType::f32, {5, 8}, 23)}, {"bias", rnd(DType::f32, {5}, 24)}},
       ""});
  c.push_back({"rms_norm", {{"x", rnd(DType::f16, {3, 8}, 25)}, {"w", rnd(DType::f32, {8}, 26)}}, "-p kind=plain"});
  c.push_back({"layer_norm",
               {{"x", rnd(DType::f32, {3, 8}, 27)}, {"w", rnd(DType::f32, {8}, 28)}, {"b", rnd(DType::f32, {8}, 29)}},
               ""});
  c.push_back({"rope",
               {{"x", rnd(DType::f32, {3, 2, 16}, 30)}, {"pos", ints({3}, {0, 7, 100})}},
               "-p rotary_dim=8 -p theta=5e6"});
  c.push_back({"rope_3d", {{"x", rnd(DType::f32, {2, 2, 80}, 31)}, {"pos", ints({2, 3}, {0, 1, 2, 3, 0, 1})}}, ""});
  c.push_back({"swiglu", {{"gate", rnd(DType::f32, {3, 8}, 32)}, {"up", rnd(DType::f32, {3, 8}, 33)}}, ""});
  c.push_back({"gelu", {{"x", rnd(DType::bf16, {3, 8}, 34)}}, ""});
  c.push_back({"add", {{"a", rnd(DType::f32, {3, 8}, 35)}, {"b", rnd(DType::f32, {3, 8}, 36)}}, ""});
  c.push_back({"embedding", {{"table", rnd(DType::f32, {10, 8}, 37)}, {"ids", ints({3}, {9, 0, 4})}}, ""});
  c.push_back({"scatter_visual",
               {{"tokens", ints({4}, {5, 99, 99, 7})},
                {"vis", rnd(DType::f32, {2, 8}, 38)},
                {"x", rnd(DType::f32, {4, 8}, 39)}},
               "-p placeholder=99"});
  c.push_back({"argmax", {{"x", rnd(DType::f32, {3, 8}, 40)}}, ""});
  // Training ops: the forward's tensors plus dout, out and lse.
  Tensors bwd = paged;
  bwd["dout"] = rnd(DType::bf16, {2, 4, 16}, 41), bwd["out"] = rnd(DType::bf16, {2, 4, 16}, 42);
  bwd["lse"] = rnd(DType::f32, {2, 4}, 43);
  c.push_back({"dense_attention_backward", bwd, ""});
  bwd["block_idx"] = sparse["block_idx"];
  c.push_back({"sparse_block_attention_backward", bwd, ""});
  Tensors pbwd = patch;
  pbwd["dout"] = rnd(DType::f32, {12, 2, 64}, 44), pbwd["out"] = rnd(DType::f32, {12, 2, 64}, 45);
  pbwd["lse"] = rnd(DType::f32, {12, 2}, 46);
  c.push_back({"patch_attention_3d_backward", pbwd, "-p window=1"});
  Tensors kl = paged;
  kl.erase("v_cache");
  kl["lse"] = bwd["lse"], kl["block_idx"] = sparse["block_idx"];
  kl["qi"] = rnd(DType::bf16, {2, 2, 16}, 47), kl["ki_cache"] = rnd(DType::bf16, {4, 8, 16}, 48);
  kl["dkl"] = rnd(DType::f32, {2, 2}, 49);
  c.push_back({"indexer_kl", kl, "-p stage=sparse -p scale_i=0.2"});
  return c;
}

TEST(Cli, OpRoundTripsEveryOp) {
  const auto cases = op_cases();
  EXPECT_EQ(cases.size(), 21u);  // every op of the contract and of docs/training.md
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op);
    const std::string in = write(c.op + "_in.safetensors", c.in);
    const std::string out = (temp_dir() / (c.op + "_out.safetensors")).string();
    const Result r = run_cli("op " + c.op + " --backend cpu-ref --in " + in + " --out " + out + " " + c.params);
    ASSERT_EQ(r.code, 0) << r.output;
    const Tensors got = msa::hal::read_safetensors(out);
    ASSERT_FALSE(got.empty());
    for (const auto& [name, t] : got) {
      SCOPED_TRACE(name);
      // Every element written (no poison left) for float outputs.
      if (t.dtype != DType::i32)
        for (int64_t i = 0; i < t.numel(); ++i) ASSERT_FALSE(std::isnan(t.get(i))) << i;
      // In/out tensors changed where the op writes.
      if (c.in.count(name)) EXPECT_NE(t.bytes, c.in.at(name).bytes);
    }
  }
}

TEST(Cli, IndexerKlStageErrorsExit2) {
  const auto cases = op_cases();
  const OpCase& kl = cases.back();
  ASSERT_EQ(kl.op, "indexer_kl");
  const std::string in = write("kl_in.safetensors", kl.in), out = (temp_dir() / "kl_out.safetensors").string();
  Result r = run_cli("op indexer_kl --backend cpu-ref --in " + in + " --out " + out + " -p stage=warm");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'--param stage'"), std::string::npos) << r.output;
  // Stage dense takes no block_idx: the file's block_idx is an unused input.
  r = run_cli("op indexer_kl --backend cpu-ref --in " + in + " --out " + out + " -p stage=dense");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'block_idx'"), std::string::npos) << r.output;
}

TEST(Cli, OpEqualsDirectCall) {
  const Tensors in = paged_inputs(DType::bf16);
  const std::string f = write("direct_in.safetensors", in);
  const std::string o = (temp_dir() / "direct_out.safetensors").string();
  ASSERT_EQ(run_cli("op dense_attention --backend cpu-ref --in " + f + " --out " + o + " -p scale=0.3").code, 0);
  auto dev = msa::hal::create_device("cpu-ref");
  std::map<std::string, msa::hal::Device::Owned> d;
  for (const auto& [n, t] : in) d[n] = msa::hal::to_device(*dev, t);
  auto out = dev->alloc_tensor(DType::bf16, {2, 4, 16});
  auto lse = dev->alloc_tensor(DType::f32, {2, 4});
  msa::ops::DenseAttentionArgs a;
  a.q = d["q"].tensor, a.k_cache = d["k_cache"].tensor, a.v_cache = d["v_cache"].tensor;
  a.block_table = d["block_table"].tensor, a.kv_len = d["kv_len"].tensor, a.cu_q = d["cu_q"].tensor;
  a.scale = 0.3f, a.out = out.tensor, a.lse = lse.tensor;
  msa::ops::dense_attention(*dev, a);
  const Tensors got = msa::hal::read_safetensors(o);
  EXPECT_EQ(got.at("out").bytes, msa::hal::to_host(*dev, out.tensor).bytes);
  EXPECT_EQ(got.at("lse").bytes, msa::hal::to_host(*dev, lse.tensor).bytes);
}

TEST(Cli, OpOutputsMatchOnRepeatAndDevicesListsCpuRef) {
  const Tensors in = paged_inputs(DType::f32);
  const std::string f = write("rep_in.safetensors", in);
  const std::string o1 = (temp_dir() / "rep1.safetensors").string(), o2 = (temp_dir() / "rep2.safetensors").string();
  ASSERT_EQ(run_cli("op dense_attention --backend cpu-ref --in " + f + " --out " + o1).code, 0);
  ASSERT_EQ(run_cli("op dense_attention --backend cpu-ref --in " + f + " --out " + o2).code, 0);
  EXPECT_EQ(msa::hal::read_safetensors(o1).at("out").bytes, msa::hal::read_safetensors(o2).at("out").bytes);
  const Result d = run_cli("devices");
  EXPECT_EQ(d.code, 0);
  EXPECT_NE(d.output.find("cpu-ref"), std::string::npos);
}

}  // namespace

// `msa layer --gpus N`: the distributed layer (host group of cpu-ref ranks) against the
// single-device layer in the same call. Blocks are split unevenly (3 ranks, 32 blocks)
// and queries of the prefill span several ranks, so blocks are fetched between ranks.
TEST(CliDist, LayerOnRanksEqualsOneDevice) {
  const std::string cfg =
      " --backend cpu-ref --config Hq=8 --config Hkv=4 --config Hi=4 --config D=32 --config Di=32"
      " --config Bs=32 --config k=4 --batch 2 --context 1000 --iters 1";
  for (const char* par : {"context", "heads"})
    for (const char* gpus : {"2", "4"}) {
      const std::string args = std::string("layer") + cfg + " --q-len 300 --gpus " + gpus + " --parallel " + par;
      const Result r = run_cli(args);
      EXPECT_EQ(r.code, 0) << args << "\n" << r.output;
      EXPECT_NE(r.output.find("block_idx identical in 100.00%"), std::string::npos) << r.output;
      EXPECT_NE(r.output.find("bitwise equal"), std::string::npos) << r.output;
    }
  const Result ctx = run_cli("layer" + cfg + " --q-len 600 --gpus 3 --parallel context");
  EXPECT_EQ(ctx.code, 0) << ctx.output;
  EXPECT_EQ(ctx.output.find("blocks fetched between ranks per step: 0\n"), std::string::npos) << ctx.output;
  // Decode: only the last rank holds queries; the others serve blocks.
  const Result dec = run_cli("layer" + cfg + " --q-len 1 --gpus 2 --parallel context");
  EXPECT_EQ(dec.code, 0) << dec.output;
  // Decode with the indexer keys split by context: scores gathered, rows permuted.
  for (const char* gpus : {"2", "4"}) {
    const Result ki = run_cli("layer" + cfg + " --q-len 1 --gpus " + gpus + " --parallel heads-sharded-ki");
    EXPECT_EQ(ki.code, 0) << ki.output;
    EXPECT_NE(ki.output.find("block_idx identical in 100.00%"), std::string::npos) << ki.output;
    EXPECT_NE(ki.output.find("bitwise equal"), std::string::npos) << ki.output;
  }
  const Result ki_prefill = run_cli("layer" + cfg + " --q-len 4 --gpus 2 --parallel heads-sharded-ki");
  EXPECT_EQ(ki_prefill.code, 2) << ki_prefill.output;
  EXPECT_NE(ki_prefill.output.find("decode"), std::string::npos) << ki_prefill.output;
  const Result bad = run_cli("layer" + cfg + " --gpus 3 --parallel heads");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--gpus"), std::string::npos) << bad.output;
  const Result bad_mode = run_cli("layer" + cfg + " --gpus 2 --parallel rows");
  EXPECT_EQ(bad_mode.code, 2) << bad_mode.output;
  EXPECT_NE(bad_mode.output.find("--parallel"), std::string::npos) << bad_mode.output;
}

// `msa run --gpus 2`: head-parallel tiny model, checked step by step against cpu-ref.
TEST(CliDist, RunHeadParallelPassesCheck) {
  const Result r =
      run_cli("run --backend cpu-ref --model tiny --prompt-tokens 300 --gen 3 --batch 2 --gpus 2 --check --quiet");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("rank 0 of 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("check: PASS"), std::string::npos) << r.output;
}

// `msa layer --queued`: the same layer, timed behind device work; the JSON names the timing
// mode and the outputs still match cpu-ref.
TEST(CliLayer, QueuedTimingRunsAndIsRecorded) {
  const std::string json = (temp_dir() / "layer_queued.json").string();
  const std::string cfg =
      " --backend cpu-ref --config Hq=8 --config Hkv=4 --config Hi=4 --config D=32 --config Di=32"
      " --config Bs=32 --config k=4 --batch 2 --context 1000 --iters 2 --check";
  const Result q = run_cli("layer" + cfg + " --queued --json " + json);
  EXPECT_EQ(q.code, 0) << q.output;
  EXPECT_NE(q.output.find("queued behind device work"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("block_idx identical"), std::string::npos) << q.output;
  std::ifstream f(json);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_NE(s.str().find("\"timing\": \"queued\""), std::string::npos) << s.str();
  // The top-k share printed and recorded is top-k over the three ops run one by one; the
  // layer as run is indexer_topk + sparse attention.
  const nlohmann::json j = nlohmann::json::parse(s.str());
  const double share = j.at("topk_share").get<double>();
  const double indexer = j.at("indexer_ms").get<double>(), topk = j.at("topk_ms").get<double>();
  const double sparse = j.at("sparse_ms").get<double>(), fused = j.at("indexer_topk_ms").get<double>();
  EXPECT_GT(share, 0.0);
  EXPECT_NEAR(share, topk / (indexer + topk + sparse), 1e-12);
  EXPECT_GT(fused, 0.0);
  EXPECT_NEAR(j.at("layer_ms").get<double>(), fused + sparse, 1e-12);
  EXPECT_NEAR(j.at("fused_select_share").get<double>(), (fused - indexer) / (fused + sparse), 1e-12);
  char line[80];
  std::snprintf(line, sizeof line, "block_topk share of the msa layer: %.1f%% (run as its own op)", 100.0 * share);
  EXPECT_NE(q.output.find(line), std::string::npos) << q.output;
  const Result single = run_cli("layer" + cfg);
  EXPECT_EQ(single.code, 0) << single.output;
  EXPECT_NE(single.output.find("single calls on an idle device"), std::string::npos) << single.output;
}

// `msa layer --drafts walk`: the draft tokens' indexer queries drift slowly, so a
// sequence's tokens share most of their blocks; independent queries select apart. The
// printed union (distinct blocks per sequence and KV head) shows it.
TEST(CliLayer, DraftWalkSelectsFewerDistinctBlocks) {
  const std::string cfg =
      " --backend cpu-ref --config Hq=8 --config Hkv=4 --config Hi=4 --config D=32 --config Di=32"
      " --config Bs=16 --config k=4 --batch 2 --context 2000 --q-len 8 --iters 1";
  auto union_of = [&](const std::string& drafts) {
    const Result r = run_cli("layer" + cfg + " --drafts " + drafts);
    EXPECT_EQ(r.code, 0) << r.output;
    const std::string key = "selection union per (sequence, KV head): ";
    const size_t at = r.output.find(key);
    EXPECT_NE(at, std::string::npos) << r.output;
    return at == std::string::npos ? 0.0 : std::stod(r.output.substr(at + key.size()));
  };
  const double walk = union_of("walk"), random = union_of("random");
  EXPECT_GE(walk, 4.0);     // at least k
  EXPECT_LE(random, 32.0);  // at most q_len x k
  EXPECT_LT(walk, 0.75 * random) << "walk " << walk << " random " << random;
  const Result bad = run_cli("layer" + cfg + " --drafts sideways");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--drafts"), std::string::npos) << bad.output;
}
