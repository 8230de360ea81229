// `msa run` and `msa init-weights` as the CLI calls them.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "hal/error.h"
#include "model/run.h"

namespace msa::model {
namespace {

TEST(ModelRun, TinyMultimodalBatchWithCheck) {
  RunOptions o;
  o.backend = "cpu-ref";
  o.prompt_tokens = 100;
  o.video_frames = 4;
  o.gen = 3;
  o.batch = 2;
  o.max_chunk = 50;
  o.check = true;
  std::ostringstream out;
  EXPECT_EQ(run_main(o, out), 0);
  const std::string s = out.str();
  for (const char* want :
       {"prefill chunk 3:", "decode step 2/2", "sparse_block_attention", "patch_attention_3d", "attended fraction",
        "tokens/s", "generated ids:", "seq 1:", "check: PASS", "prompt tokens 108 83"})
    EXPECT_NE(s.find(want), std::string::npos) << "missing '" << want << "' in\n" << s;
}

TEST(ModelRun, InitWeightsThenRunFromTheDirectory) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "msa_model_test_run_dir";
  fs::remove_all(dir);
  std::ostringstream out;
  EXPECT_EQ(init_weights_main(dir.string(), "tiny", 3, out), 0);
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  RunOptions o;
  o.backend = "cpu-ref";
  o.model = dir.string();
  o.prompt_ids = {1, 2, 3, 4, 5};
  o.gen = 2;
  o.profile = false;
  o.progress = false;
  std::ostringstream run_out;
  EXPECT_EQ(run_main(o, run_out), 0);
  EXPECT_EQ(run_out.str().find("per-op"), std::string::npos);  // not profiled
  fs::remove_all(dir);
}

TEST(ModelRun, BadOptionsAreErrors) {
  std::ostringstream out;
  RunOptions o;
  o.backend = "cpu-ref";
  o.model = "/nonexistent/model";
  EXPECT_THROW(run_main(o, out), Error);
  o.model = "tiny";
  o.gen = 0;
  EXPECT_THROW(run_main(o, out), Error);
  o.gen = 1;
  o.prompt_ids = {5000};
  EXPECT_THROW(run_main(o, out), Error);
  o.prompt_ids = {};
  o.video_frames = 2;
  o.video_height = 10;  // smaller than one 28 x 28 merge block
  EXPECT_THROW(run_main(o, out), Error);
  EXPECT_THROW(init_weights_main("/tmp/x", "huge", 0, out), Error);
}

}  // namespace
}  // namespace msa::model
