// Weight names and shapes, save/load, and the errors for missing, extra and mis-shaped
// tensors.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>

#include "hal/error.h"
#include "hal/safetensors.h"
#include "model/weights.h"
#include "test_util.h"

namespace msa::model {
namespace {

namespace fs = std::filesystem;

// A fresh temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("msa_model_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

void expect_error_naming(const std::function<void()>& f, const std::string& name) {
  try {
    f();
    ADD_FAILURE() << "no error naming " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(ModelWeights, TinyIsAFewMegabytes) {
  const Weights& w = testing::tiny_weights();
  EXPECT_GT(w.nbytes(), size_t{1} << 20);
  EXPECT_LT(w.nbytes(), size_t{8} << 20);
  EXPECT_EQ(w.tensors.size(), weight_specs(w.config).size());
  // One dense layer without an index branch, one MSA layer with one.
  EXPECT_FALSE(w.tensors.count("model.layers.0.self_attn.indexer.q_proj.weight"));
  EXPECT_TRUE(w.tensors.count("model.layers.1.self_attn.indexer.q_proj.weight"));
  EXPECT_EQ(w.at("model.layers.1.self_attn.indexer.k_proj.weight").shape, (std::vector<int64_t>{64, 128}));
}

TEST(ModelWeights, InitIsSeededAndDeterministic) {
  const Config c = preset_config("tiny");
  const Weights a = init_weights(c, 1), b = init_weights(c, 1), d = init_weights(c, 2);
  const auto& name = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_EQ(a.at(name).bytes, b.at(name).bytes);
  EXPECT_NE(a.at(name).bytes, d.at(name).bytes);
}

TEST(ModelWeights, SaveThenLoadGivesTheSameTensors) {
  TempDir dir;
  const Weights& w = testing::tiny_weights();
  save_weights(w, dir.str());
  const Weights l = load_weights(dir.str());
  EXPECT_EQ(to_json(l.config), to_json(w.config));
  ASSERT_EQ(l.tensors.size(), w.tensors.size());
  for (const auto& [name, t] : w.tensors) {
    EXPECT_EQ(l.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(l.at(name).shape, t.shape) << name;
    EXPECT_EQ(l.at(name).bytes, t.bytes) << name;
  }
}

TEST(ModelWeights, MissingExtraAndMisShapedTensorsAreNamed) {
  const Weights& w = testing::tiny_weights();
  {
    auto t = w.tensors;
    t.erase("model.layers.1.self_attn.indexer.k_norm.weight");
    expect_error_naming([&] { check_weights(w.config, t); }, "model.layers.1.self_attn.indexer.k_norm.weight");
  }
  {
    auto t = w.tensors;
    t.emplace("model.layers.7.mlp.up_proj.weight", hal::HostTensor(hal::DType::bf16, {4}));
    expect_error_naming([&] { check_weights(w.config, t); }, "model.layers.7.mlp.up_proj.weight");
  }
  {
    auto t = w.tensors;
    t["model.layers.0.self_attn.o_proj.weight"] = hal::HostTensor(hal::DType::bf16, {256, 128});
    expect_error_naming([&] { check_weights(w.config, t); }, "model.layers.0.self_attn.o_proj.weight");
  }
  {
    auto t = w.tensors;
    t["model.norm.weight"] = hal::HostTensor(hal::DType::i32, {128});
    expect_error_naming([&] { check_weights(w.config, t); }, "model.norm.weight");
  }
}

TEST(ModelWeights, LoadErrorsNameTheTensor) {
  TempDir dir;
  Weights w = testing::tiny_weights();
  w.tensors.erase("visual.merger.mlp.2.bias");
  save_weights(w, dir.str());
  expect_error_naming([&] { load_weights(dir.str()); }, "visual.merger.mlp.2.bias");

  // The same tensor in two files.
  TempDir dir2;
  save_weights(testing::tiny_weights(), dir2.str());
  hal::write_safetensors((dir2.path / "extra.safetensors").string(),
                         {{"model.norm.weight", testing::tiny_weights().at("model.norm.weight")}});
  expect_error_naming([&] { load_weights(dir2.str()); }, "model.norm.weight");

  EXPECT_THROW(load_weights((dir.path / "nope").string()), Error);
}

TEST(ModelWeights, Conv3dPatchEmbeddingShapeIsAccepted) {
  const Weights& w = testing::tiny_weights();
  auto t = w.tensors;
  const VisionConfig& v = w.config.vision;
  t["visual.patch_embed.proj.weight"].shape = {v.hidden_size, 3, v.temporal_patch_size, v.patch_size, v.patch_size};
  check_weights(w.config, t);
  EXPECT_EQ(t["visual.patch_embed.proj.weight"].shape, (std::vector<int64_t>{v.hidden_size, v.patch_dim()}));
}

TEST(ModelWeights, F32AndF16FilesLoad) {
  TempDir dir;
  Weights w = testing::tiny_weights();
  for (auto& [name, t] : w.tensors) {
    hal::HostTensor c(name.find("mlp") != std::string::npos ? hal::DType::f16 : hal::DType::f32, t.shape);
    for (int64_t i = 0; i < t.numel(); ++i) c.set(static_cast<size_t>(i), t.get(static_cast<size_t>(i)));
    t = std::move(c);
  }
  save_weights(w, dir.str());
  const Weights l = load_weights(dir.str());
  EXPECT_EQ(l.at("model.layers.0.mlp.up_proj.weight").dtype, hal::DType::f16);
  EXPECT_EQ(l.at("model.norm.weight").dtype, hal::DType::f32);
}

}  // namespace
}  // namespace msa::model
