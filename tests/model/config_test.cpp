// config.json parsing, validation errors naming the field, and the presets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hal/error.h"
#include "model/config.h"

namespace msa::model {
namespace {

// Expects parse_config(j) to throw msa::Error whose message names `field`.
void expect_field_error(const nlohmann::json& j, const std::string& field) {
  try {
    parse_config(j);
    ADD_FAILURE() << "no error for field " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + field + "'"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, PresetsRoundTripThroughJson) {
  for (const char* name : {"tiny", "m3-attn"}) {
    const Config c = preset_config(name);
    const Config d = parse_config(to_json(c));
    EXPECT_EQ(to_json(c), to_json(d)) << name;
  }
}

TEST(ModelConfig, M3AttnHasM3AttentionShape) {
  const Config c = preset_config("m3-attn");
  EXPECT_EQ(c.num_attention_heads, 64);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.sparse_num_index_heads, 4);
  EXPECT_EQ(c.sparse_index_dim, 128);
  EXPECT_EQ(c.sparse_block_size, 128);
  EXPECT_EQ(c.sparse_topk_blocks, 16);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 5e6f);
  EXPECT_EQ(c.vision.head_dim(), 80);
  EXPECT_EQ(c.selection_mode(), ops::SelectionMode::per_kv_head);
}

TEST(ModelConfig, HuggingFaceFieldsAndDefaults) {
  nlohmann::json j = {{"hidden_size", 256},       {"num_hidden_layers", 4}, {"num_attention_heads", 8},
                      {"num_key_value_heads", 2}, {"head_dim", 64},         {"intermediate_size", 512},
                      {"vocab_size", 500},        {"partial_rotary_factor", 0.25},
                      {"torch_dtype", "float32"}, {"sparse_score_type", "lse"},
                      {"sparse_num_index_heads", 1}};
  const Config c = parse_config(j);
  EXPECT_EQ(c.rotary_dim, 16);
  EXPECT_EQ(c.num_dense_layers, 3);  // M3's default
  EXPECT_EQ(c.sparse_index_dim, 64);
  EXPECT_EQ(c.torch_dtype, hal::DType::f32);
  EXPECT_EQ(c.sparse_score_type, ops::Pool::lse);
  EXPECT_EQ(c.selection_mode(), ops::SelectionMode::shared);
  EXPECT_FALSE(c.vision.enabled());
}

TEST(ModelConfig, BadValuesNameTheirField) {
  const nlohmann::json good = to_json(preset_config("tiny"));
  auto with = [&](const char* k, nlohmann::json v) {
    nlohmann::json j = good;
    j[k] = v;
    return j;
  };
  expect_field_error(with("num_key_value_heads", 3), "num_key_value_heads");
  expect_field_error(with("hidden_size", -1), "hidden_size");
  expect_field_error(with("hidden_size", "big"), "hidden_size");
  expect_field_error(with("rotary_dim", 65), "rotary_dim");
  expect_field_error(with("sparse_num_index_heads", 3), "sparse_num_index_heads");
  expect_field_error(with("sparse_topk_blocks", 0), "sparse_topk_blocks");
  expect_field_error(with("sparse_query_block", 3), "sparse_query_block");
  expect_field_error(with("sparse_score_type", "mean"), "sparse_score_type");
  expect_field_error(with("torch_dtype", "int8"), "torch_dtype");
  expect_field_error(with("num_dense_layers", 5), "num_dense_layers");
  expect_field_error(with("image_token_id", 5000), "image_token_id");
  nlohmann::json j = good;
  j.erase("vocab_size");
  expect_field_error(j, "vocab_size");
  j = good;
  j["vision_config"]["num_heads"] = 3;
  expect_field_error(j, "vision_config.num_heads");
  j = good;
  j["vision_config"].erase("hidden_size");
  expect_field_error(j, "vision_config.hidden_size");
}

TEST(ModelConfig, UnknownPresetIsAnError) {
  EXPECT_THROW(preset_config("huge"), Error);
  EXPECT_TRUE(is_preset("tiny"));
  EXPECT_FALSE(is_preset("./tiny"));
}

}  // namespace
}  // namespace msa::model
