// config.json parsing, validation errors naming the field, and the presets.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cfloat>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hal/error.h"
#include "model/config.h"

namespace msa::model {
namespace {

// Expects parse_config(j) to throw msa::Error whose message names `field` (and contains
// `shows`, when given).
void expect_field_error(const nlohmann::json& j, const std::string& field, const std::string& shows = "") {
  try {
    parse_config(j);
    ADD_FAILURE() << "no error for field " << field << " (" << shows << ")";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + field + "'"), std::string::npos) << what;
    EXPECT_NE(what.find(shows), std::string::npos) << "expected '" << shows << "' in: " << what;
  }
}

// The tiny preset's config.json with `path` ("rope_theta", "vision_config.rope_theta") set
// to the JSON text `value` (parsed, as load_config would read it).
nlohmann::json tiny_with(const std::string& path, const std::string& value) {
  nlohmann::json j = to_json(preset_config("tiny"));
  nlohmann::json* obj = &j;
  std::string key = path;
  if (const auto dot = path.find('.'); dot != std::string::npos) {
    obj = &j[path.substr(0, dot)];
    key = path.substr(dot + 1);
  }
  (*obj)[key] = nlohmann::json::parse(value);
  if (key == "partial_rotary_factor") j.erase("rotary_dim");  // rotary_dim would win
  return j;
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
  nlohmann::json j = {{"hidden_size", 256},
                      {"num_hidden_layers", 4},
                      {"num_attention_heads", 8},
                      {"num_key_value_heads", 2},
                      {"head_dim", 64},
                      {"intermediate_size", 512},
                      {"vocab_size", 500},
                      {"partial_rotary_factor", 0.25},
                      {"torch_dtype", "float32"},
                      {"sparse_score_type", "lse"},
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

// Float fields are read as float: values that overflow to inf or vanish to 0 (or to a
// denormal) must be rejected, not silently converted. (Before: rope_theta 1e300 loaded as
// inf; vision_config.layer_norm_eps was not checked at all.)
TEST(ModelConfig, FloatFieldsMustBeFinitePositiveFloats) {
  const std::vector<std::string> fields = {"rms_norm_eps", "rope_theta", "partial_rotary_factor",
                                           "vision_config.rope_theta", "vision_config.layer_norm_eps"};
  for (const std::string& f : fields) {
    SCOPED_TRACE(f);
    for (const char* bad : {"1e300", "-1e300", "3.5e38", "1e-50", "1e-40", "0", "-0.0", "-1"})
      expect_field_error(tiny_with(f, bad), f, "got " + nlohmann::json::parse(bad).dump());
    // A json built in C++ can hold NaN and infinities (JSON text cannot).
    for (double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
      nlohmann::json j = tiny_with(f, "1");
      if (f.rfind("vision_config.", 0) == 0) {
        j["vision_config"][f.substr(14)] = bad;
      } else {
        j[f] = bad;
      }
      expect_field_error(j, f, "must be a finite positive number in float range");
    }
  }
  // The float range's ends are accepted and kept exactly.
  EXPECT_EQ(parse_config(tiny_with("rope_theta", "3.4028234663852886e38")).rope_theta, FLT_MAX);
  EXPECT_EQ(parse_config(tiny_with("rms_norm_eps", "1.1754943508222875e-38")).rms_norm_eps, FLT_MIN);
  EXPECT_EQ(parse_config(tiny_with("vision_config.layer_norm_eps", "1e-5")).vision.layer_norm_eps, 1e-5f);
  EXPECT_EQ(parse_config(tiny_with("partial_rotary_factor", "1")).rotary_dim, 64);
  expect_field_error(tiny_with("partial_rotary_factor", "1.5"), "partial_rotary_factor", "got 1.5");
  // validate() checks a Config built in C++ the same way.
  Config c = preset_config("tiny");
  c.rope_theta = INFINITY;
  EXPECT_THROW(validate(c), Error);
  c = preset_config("tiny");
  c.vision.layer_norm_eps = 0.0f;
  EXPECT_THROW(validate(c), Error);
}

// Integers past int32, written as integers (also above INT64_MAX, which nlohmann holds as
// uint64) or as floats, are rejected with the value as written: never wrapped around.
// (Before: 18446744073709551615 became -1, accepted as image_token_id and reported as "got
// -1" for hidden_size.)
TEST(ModelConfig, HugeIntegersAreRejectedAsWritten) {
  const std::vector<std::string> fields = {"hidden_size",        "vocab_size",          "image_token_id",
                                           "sparse_local_block", "vision_config.depth", "vision_config.patch_size"};
  for (const std::string& f : fields) {
    SCOPED_TRACE(f);
    for (const char* bad : {"18446744073709551615", "18446744073709551614", "9223372036854775808", "4294967295",
                            "2147483648", "-2147483649", "-9223372036854775808", "1e30", "-1e30"}) {
      // The value as written (nlohmann prints 1e30 as 1e+30), never a wrapped one.
      expect_field_error(tiny_with(f, bad), f,
                         "must be an integer in [-2147483648, 2147483647], got " + nlohmann::json::parse(bad).dump());
    }
  }
  expect_field_error(tiny_with("hidden_size", "128.5"), "hidden_size", "must be an integer, got 128.5");
  EXPECT_EQ(parse_config(tiny_with("hidden_size", "128.0")).hidden_size, 128);
}

// Negative or in-range but huge integers get a message naming the field and the value.
TEST(ModelConfig, NegativeAndOverflowingIntegersNameTheirField) {
  for (const char* f : {"hidden_size",
                        "num_hidden_layers",
                        "num_attention_heads",
                        "head_dim",
                        "intermediate_size",
                        "vocab_size",
                        "sparse_block_size",
                        "sparse_topk_blocks",
                        "sparse_local_block",
                        "sparse_init_block",
                        "sparse_query_block",
                        "num_dense_layers",
                        "image_token_id",
                        "vision_config.depth",
                        "vision_config.hidden_size",
                        "vision_config.intermediate_size",
                        "vision_config.patch_size",
                        "vision_config.temporal_patch_size",
                        "vision_config.spatial_merge_size",
                        "vision_config.window",
                        "vision_config.in_channels"}) {
    SCOPED_TRACE(f);
    expect_field_error(tiny_with(f, "-2"), f, "got -2");
    expect_field_error(tiny_with(f, "-2147483648"), f, "got -2147483648");
  }
  // A model without sparse layers still rejects negative sparse counts.
  nlohmann::json dense = to_json(preset_config("tiny"));
  dense["num_dense_layers"] = 2;
  EXPECT_NO_THROW(parse_config(dense));
  for (const char* f : {"sparse_local_block", "sparse_init_block"}) {
    nlohmann::json j = dense;
    j[f] = -1;
    expect_field_error(j, f, "got -1");
  }
  // In int32 range, but patch_dim() / merge_tokens() (int products) would overflow.
  expect_field_error(tiny_with("vision_config.patch_size", "2147483647"), "vision_config.patch_size",
                     "exceeds 2147483647");
  expect_field_error(tiny_with("vision_config.patch_size", "18919"), "vision_config.patch_size", "3 * 2 * 18919^2");
  EXPECT_EQ(parse_config(tiny_with("vision_config.patch_size", "18918")).vision.patch_dim(), 3 * 2 * 18918 * 18918);
  expect_field_error(tiny_with("vision_config.temporal_patch_size", "2147483647"), "vision_config.patch_size",
                     "3 * 2147483647 * 14^2");
  expect_field_error(tiny_with("vision_config.spatial_merge_size", "46341"), "vision_config.spatial_merge_size",
                     "got 46341");
  EXPECT_EQ(parse_config(tiny_with("vision_config.spatial_merge_size", "46340")).vision.merge_tokens(), 46340 * 46340);
}

TEST(ModelConfig, UnknownPresetIsAnError) {
  EXPECT_THROW(preset_config("huge"), Error);
  EXPECT_TRUE(is_preset("tiny"));
  EXPECT_FALSE(is_preset("./tiny"));
}

// Writes `text` as a config.json in the temp folder and returns the load_config error.
std::string load_error(const std::string& text) {
  const std::string path = ::testing::TempDir() + "msa_config_" + std::to_string(::getpid()) + "_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  try {
    load_config(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// 100k nested arrays (200 KB) in a field are rejected while parsing, before anything
// walks them recursively; a deep value built in C++ is quoted as a short excerpt.
TEST(ModelConfig, DeepNestingIsRejectedWithoutRecursion) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& text : {R"({"hidden_size":)" + deep + "}", deep, R"({"vision_config":)" + deep + "}"}) {
    const std::string m = load_error(text);
    EXPECT_NE(m.find("deeper than 64 levels"), std::string::npos) << m.substr(0, 300);
  }
  auto nested = [] {  // built by moves: copying or dumping it would recurse 100k levels
    nlohmann::json v = 1;
    for (int i = 0; i < 100000; ++i) {
      nlohmann::json a = nlohmann::json::array();
      a.push_back(std::move(v));
      v = std::move(a);
    }
    return v;
  };
  for (const char* f : {"hidden_size", "rope_theta", "tie_word_embeddings", "torch_dtype"}) {
    nlohmann::json j = to_json(preset_config("tiny"));
    j[f] = nested();
    expect_field_error(j, f, "[[[[...]]]]");
  }
}

// Keys given twice (one would silently win), NUL bytes and a file far larger than any
// config.json are errors.
TEST(ModelConfig, RepeatedKeysNulAndHugeFilesAreRejected) {
  EXPECT_NE(load_error(R"({"hidden_size": 64, "hidden_size": 128})").find("has the key \"hidden_size\" twice"),
            std::string::npos);
  EXPECT_NE(load_error(std::string("{}\0{\"x\":1}", 10)).find("NUL byte at offset 2"), std::string::npos);
  EXPECT_NE(load_error("{\"a\":\"" + std::string(17 << 20, 'x') + "\"}").find("more than a config.json's"),
            std::string::npos);
  EXPECT_LT(load_error("{\"" + std::string(1 << 20, 'x')).size(), 400u);  // parser message clipped
}

}  // namespace
}  // namespace msa::model
