// Reading, writing, validating config.json and the built-in presets.
#include "model/config.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>

#include <nlohmann/json.hpp>

#include "hal/error.h"
#include "hal/json_bounds.h"

namespace msa::model {
namespace {

using nlohmann::json;

[[noreturn]] void field_error(const std::string& field, const std::string& what) {
  throw Error("config.json: field '" + field + "': " + what);
}

// A JSON value as it appears in a message: a short excerpt of its JSON text (non-finite
// numbers, which a json built in C++ can hold, as nan / inf).
std::string show(const json& v) { return hal::json_excerpt(v); }

std::string show(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Every float field (epsilons, RoPE thetas, partial_rotary_factor) is a positive value that
// must survive the conversion to float: finite, not above FLT_MAX (1e300 would become inf),
// not below FLT_MIN (1e-50 would become 0 or a denormal).
void check_float_range(double v, const std::string& field, const std::string& text) {
  if (!(std::isfinite(v) && v >= FLT_MIN && v <= FLT_MAX))
    field_error(field, "must be a finite positive number in float range [" + show(FLT_MIN) + ", " + show(FLT_MAX) +
                           "], got " + text);
}

// Reads an integer field; `fallback` empty = required. Accepts JSON integers and integral
// floats (4.0) in int32 range; the message shows the value as written (an unsigned value
// above INT64_MAX is compared as unsigned, never wrapped to a negative one).
int get_int(const json& j, const std::string& prefix, const char* name, std::optional<int> fallback) {
  const std::string field = prefix + name;
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) {
    if (!fallback) field_error(field, "missing (required)");
    return *fallback;
  }
  const json& v = *it;
  // The message is built only on failure, from a bounded excerpt of the value.
  auto out_of_range = [&] {
    field_error(field, "out of range: must be an integer in [-2147483648, 2147483647], got " + show(v));
  };
  if (v.is_number_unsigned()) {  // before is_number_integer(), which is also true for it
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) out_of_range();
    return static_cast<int>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i < INT32_MIN || i > INT32_MAX) out_of_range();
    return static_cast<int>(i);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d) {
      if (d < INT32_MIN || d > INT32_MAX) out_of_range();  // cast would be UB
      return static_cast<int>(d);
    }
  }
  field_error(field, "must be an integer, got " + show(v));
}

float get_float(const json& j, const std::string& prefix, const char* name, float fallback) {
  const std::string field = prefix + name;
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) field_error(field, "must be a number, got " + show(*it));
  check_float_range(it->get<double>(), field, show(*it));
  return static_cast<float>(it->get<double>());
}

bool get_bool(const json& j, const char* name, bool fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) field_error(name, "must be true or false, got " + show(*it));
  return it->get<bool>();
}

std::string get_string(const json& j, const char* name, const std::string& fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) field_error(name, "must be a string, got " + show(*it));
  return it->get<std::string>();
}

void require(bool cond, const std::string& field, const std::string& what) {
  if (!cond) field_error(field, what);
}

VisionConfig parse_vision(const json& v) {
  const std::string p = "vision_config.";
  if (!v.is_object()) field_error("vision_config", "must be an object");
  VisionConfig c;
  c.depth = get_int(v, p, "depth", 0);
  require(c.depth >= 0, p + "depth", "must be >= 0 (0 = no vision encoder), got " + std::to_string(c.depth));
  if (c.depth == 0) return c;
  c.hidden_size = get_int(v, p, "hidden_size", std::nullopt);
  c.num_heads = get_int(v, p, "num_heads", std::nullopt);
  c.intermediate_size = get_int(v, p, "intermediate_size", std::nullopt);
  c.patch_size = get_int(v, p, "patch_size", 14);
  c.temporal_patch_size = get_int(v, p, "temporal_patch_size", 2);
  c.spatial_merge_size = get_int(v, p, "spatial_merge_size", 2);
  c.in_channels = get_int(v, p, "in_channels", 3);
  c.window = get_int(v, p, "window", 4);
  c.rope_theta = get_float(v, p, "rope_theta", 1e4f);
  c.layer_norm_eps = get_float(v, p, "layer_norm_eps", 1e-6f);
  return c;
}

}  // namespace

Config parse_config(const json& j) {
  if (!j.is_object()) throw Error("config.json: must be a JSON object");
  Config c;
  c.hidden_size = get_int(j, "", "hidden_size", std::nullopt);
  c.num_hidden_layers = get_int(j, "", "num_hidden_layers", std::nullopt);
  c.num_attention_heads = get_int(j, "", "num_attention_heads", std::nullopt);
  c.num_key_value_heads = get_int(j, "", "num_key_value_heads", c.num_attention_heads);
  require(c.num_attention_heads > 0, "num_attention_heads",
          "must be positive, got " + std::to_string(c.num_attention_heads));
  c.head_dim = get_int(j, "", "head_dim", c.hidden_size / c.num_attention_heads);
  c.intermediate_size = get_int(j, "", "intermediate_size", std::nullopt);
  c.vocab_size = get_int(j, "", "vocab_size", std::nullopt);
  c.rms_norm_eps = get_float(j, "", "rms_norm_eps", 1e-6f);
  c.rope_theta = get_float(j, "", "rope_theta", 5e6f);
  if (j.contains("rotary_dim") && !j["rotary_dim"].is_null()) {
    c.rotary_dim = get_int(j, "", "rotary_dim", std::nullopt);
  } else {
    const float f = get_float(j, "", "partial_rotary_factor", 0.5f);
    require(f <= 1.0f, "partial_rotary_factor", "must be in (0, 1], got " + show(f));
    c.rotary_dim = static_cast<int>(std::lround(f * c.head_dim));
  }
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false);
  c.num_dense_layers = get_int(j, "", "num_dense_layers", std::min(3, c.num_hidden_layers));
  c.sparse_num_index_heads = get_int(j, "", "sparse_num_index_heads", c.num_key_value_heads);
  c.sparse_index_dim = get_int(j, "", "sparse_index_dim", c.head_dim);
  c.sparse_block_size = get_int(j, "", "sparse_block_size", 128);
  c.sparse_topk_blocks = get_int(j, "", "sparse_topk_blocks", 16);
  c.sparse_local_block = get_int(j, "", "sparse_local_block", 1);
  c.sparse_init_block = get_int(j, "", "sparse_init_block", 0);
  c.sparse_query_block = get_int(j, "", "sparse_query_block", 1);
  const std::string score = get_string(j, "sparse_score_type", "max");
  if (score == "max") {
    c.sparse_score_type = ops::Pool::max;
  } else if (score == "lse") {
    c.sparse_score_type = ops::Pool::lse;
  } else {
    field_error("sparse_score_type", "must be \"max\" or \"lse\", got " + show(json(score)));
  }
  c.image_token_id = get_int(j, "", "image_token_id", -1);
  const std::string dt = get_string(j, "torch_dtype", "bfloat16");
  try {
    c.torch_dtype = hal::parse_dtype(dt, "torch_dtype");
  } catch (const Error&) {
    field_error("torch_dtype", "unknown dtype " + show(json(dt)));
  }
  if (j.contains("vision_config") && !j["vision_config"].is_null()) c.vision = parse_vision(j["vision_config"]);
  validate(c);
  return c;
}

Config load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("config: cannot open '" + path + "'");
  // A config.json is a few KB; a file past this bound is not one (and is not read whole).
  constexpr std::streamoff kMaxConfigBytes = 16 << 20;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size > kMaxConfigBytes)
    throw Error("config: '" + path + "' is " + std::to_string(size) + " bytes, more than a config.json's " +
                std::to_string(kMaxConfigBytes));
  in.seekg(0);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error("config: cannot read '" + path + "'");
  return parse_config(hal::parse_json_bounded(text, "config: '" + path + "'"));
}

json to_json(const Config& c) {
  json j;
  j["model_type"] = "msa_m3";
  j["hidden_size"] = c.hidden_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["intermediate_size"] = c.intermediate_size;
  j["vocab_size"] = c.vocab_size;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["rotary_dim"] = c.rotary_dim;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["num_dense_layers"] = c.num_dense_layers;
  j["sparse_num_index_heads"] = c.sparse_num_index_heads;
  j["sparse_index_dim"] = c.sparse_index_dim;
  j["sparse_block_size"] = c.sparse_block_size;
  j["sparse_topk_blocks"] = c.sparse_topk_blocks;
  j["sparse_local_block"] = c.sparse_local_block;
  j["sparse_init_block"] = c.sparse_init_block;
  j["sparse_score_type"] = ops::pool_name(c.sparse_score_type);
  j["sparse_query_block"] = c.sparse_query_block;
  j["image_token_id"] = c.image_token_id;
  j["torch_dtype"] = c.torch_dtype == hal::DType::bf16  ? "bfloat16"
                     : c.torch_dtype == hal::DType::f16 ? "float16"
                                                        : "float32";
  const VisionConfig& v = c.vision;
  json vj;
  vj["depth"] = v.depth;
  if (v.enabled()) {
    vj["hidden_size"] = v.hidden_size;
    vj["num_heads"] = v.num_heads;
    vj["intermediate_size"] = v.intermediate_size;
    vj["patch_size"] = v.patch_size;
    vj["temporal_patch_size"] = v.temporal_patch_size;
    vj["spatial_merge_size"] = v.spatial_merge_size;
    vj["in_channels"] = v.in_channels;
    vj["window"] = v.window;
    vj["rope_theta"] = v.rope_theta;
    vj["layer_norm_eps"] = v.layer_norm_eps;
  }
  j["vision_config"] = vj;
  return j;
}

void validate(const Config& c) {
  auto positive = [](int v, const char* f) { require(v > 0, f, "must be positive, got " + std::to_string(v)); };
  positive(c.hidden_size, "hidden_size");
  positive(c.num_hidden_layers, "num_hidden_layers");
  // The weights list and the caches are sized per layer: a bound far past any model's.
  require(c.num_hidden_layers <= kMaxLayers, "num_hidden_layers",
          "must be <= " + std::to_string(kMaxLayers) + ", got " + std::to_string(c.num_hidden_layers));
  positive(c.num_attention_heads, "num_attention_heads");
  positive(c.num_key_value_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.vocab_size, "vocab_size");
  require(c.num_attention_heads % c.num_key_value_heads == 0, "num_key_value_heads",
          "must divide num_attention_heads (" + std::to_string(c.num_attention_heads) + ")");
  require(c.head_dim % 2 == 0, "head_dim", "must be even");
  require(c.rotary_dim >= 0 && c.rotary_dim <= c.head_dim && c.rotary_dim % 2 == 0, "rotary_dim",
          "must be even and in [0, head_dim], got " + std::to_string(c.rotary_dim));
  check_float_range(c.rms_norm_eps, "rms_norm_eps", show(c.rms_norm_eps));
  check_float_range(c.rope_theta, "rope_theta", show(c.rope_theta));
  require(c.num_dense_layers >= 0 && c.num_dense_layers <= c.num_hidden_layers, "num_dense_layers",
          "must be in [0, num_hidden_layers], got " + std::to_string(c.num_dense_layers));
  require(c.torch_dtype == hal::DType::bf16 || c.torch_dtype == hal::DType::f16 || c.torch_dtype == hal::DType::f32,
          "torch_dtype", "must be bfloat16, float16 or float32");
  auto non_negative = [](int v, const char* f) { require(v >= 0, f, "must be >= 0, got " + std::to_string(v)); };
  positive(c.sparse_block_size, "sparse_block_size");
  // Counts are checked even in a model without sparse layers: a negative one is never meant.
  non_negative(c.sparse_local_block, "sparse_local_block");
  non_negative(c.sparse_init_block, "sparse_init_block");
  require(c.image_token_id >= -1, "image_token_id",
          "must be -1 (none) or a token id, got " + std::to_string(c.image_token_id));
  if (c.num_sparse_layers() > 0) {
    positive(c.sparse_num_index_heads, "sparse_num_index_heads");
    positive(c.sparse_index_dim, "sparse_index_dim");
    require(c.sparse_num_index_heads == c.num_key_value_heads || c.sparse_num_index_heads == 1,
            "sparse_num_index_heads", "must equal num_key_value_heads (M3) or be 1 (shared)");
    require(c.sparse_index_dim % 2 == 0, "sparse_index_dim", "must be even");
    positive(c.sparse_topk_blocks, "sparse_topk_blocks");
    const int qb = c.sparse_query_block;
    require(qb >= 1 && qb <= 128 && (qb & (qb - 1)) == 0, "sparse_query_block",
            "must be 1 or a power of two up to 128, got " + std::to_string(qb));
    const int64_t need =
        int64_t{c.sparse_init_block} +  // int64: INT_MAX fields must not overflow
        (c.sparse_local_block > 0 ? int64_t{c.sparse_local_block} - 1 + std::max(1, qb / c.sparse_block_size) : 0);
    require(c.sparse_topk_blocks >= need, "sparse_topk_blocks",
            "must be >= sparse_init_block + sparse_local_block forced blocks (" + std::to_string(need) + ")");
  }
  require(c.image_token_id < c.vocab_size, "image_token_id",
          "must be < vocab_size (" + std::to_string(c.vocab_size) + "), got " + std::to_string(c.image_token_id));
  const VisionConfig& v = c.vision;
  require(v.depth >= 0 && v.depth <= kMaxLayers, "vision_config.depth",
          "must be in [0, " + std::to_string(kMaxLayers) + "] (0 = no vision encoder), got " + std::to_string(v.depth));
  if (v.enabled()) {
    positive(v.hidden_size, "vision_config.hidden_size");
    require(v.num_heads > 0 && v.hidden_size % v.num_heads == 0, "vision_config.num_heads",
            "must be positive and divide vision_config.hidden_size");
    require(v.head_dim() % 2 == 0 && v.head_dim() >= 6, "vision_config.num_heads",
            "gives an odd or too small head dim " + std::to_string(v.head_dim()));
    positive(v.intermediate_size, "vision_config.intermediate_size");
    positive(v.patch_size, "vision_config.patch_size");
    positive(v.temporal_patch_size, "vision_config.temporal_patch_size");
    positive(v.spatial_merge_size, "vision_config.spatial_merge_size");
    require(v.in_channels == 3, "vision_config.in_channels", "must be 3 (RGB), got " + std::to_string(v.in_channels));
    positive(v.window, "vision_config.window");
    // patch_dim() and merge_tokens() are int products: int32 fields must not overflow them.
    const int64_t area = int64_t{v.patch_size} * v.patch_size;  // <= 2^62: no int64 overflow
    require(area <= INT32_MAX / (int64_t{v.in_channels} * v.temporal_patch_size), "vision_config.patch_size",
            "in_channels * temporal_patch_size * patch_size^2 = " + std::to_string(v.in_channels) + " * " +
                std::to_string(v.temporal_patch_size) + " * " + std::to_string(v.patch_size) +
                "^2 values per patch exceeds 2147483647");
    require(int64_t{v.spatial_merge_size} * v.spatial_merge_size <= INT32_MAX, "vision_config.spatial_merge_size",
            "spatial_merge_size^2 patches per token exceeds 2147483647, got " + std::to_string(v.spatial_merge_size));
    check_float_range(v.rope_theta, "vision_config.rope_theta", show(v.rope_theta));
    check_float_range(v.layer_norm_eps, "vision_config.layer_norm_eps", show(v.layer_norm_eps));
    require(c.image_token_id >= 0, "image_token_id", "required by a model with vision_config");
  }
}

bool is_preset(std::string_view name) { return name == "tiny" || name == "m3-attn"; }

Config preset_config(std::string_view name) {
  Config c;
  if (name == "tiny") {
    // A few MB: 1 dense + 1 MSA layer, backend-supported sizes (D = Di = 64, Bs = 64,
    // G = 2), selection sparse once the context passes k * Bs = 256 tokens.
    c.hidden_size = 128;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 64;
    c.intermediate_size = 384;
    c.vocab_size = 1024;
    c.num_dense_layers = 1;
    c.sparse_num_index_heads = 2;
    c.sparse_index_dim = 64;
    c.sparse_block_size = 64;
    c.sparse_topk_blocks = 4;
    c.image_token_id = 1000;
    c.vision.hidden_size = 160;  // 2 heads x 80 (M3's ViT head dim)
    c.vision.num_heads = 2;
    c.vision.depth = 2;
    c.vision.intermediate_size = 320;
  } else if (name == "m3-attn") {
    // M3's attention: Hq = 64, Hkv = 4, D = 128, Hi = 4, Di = 128, Bs = 128, k = 16;
    // 1 dense + 1 MSA layer, a small MLP and vocabulary; M3's ViT attention (16 x 80).
    c.hidden_size = 2048;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 64;
    c.num_key_value_heads = 4;
    c.head_dim = 128;
    c.intermediate_size = 2048;
    c.vocab_size = 8192;
    c.num_dense_layers = 1;
    c.sparse_num_index_heads = 4;
    c.sparse_index_dim = 128;
    c.sparse_block_size = 128;
    c.sparse_topk_blocks = 16;
    c.image_token_id = 8000;
    c.vision.hidden_size = 1280;
    c.vision.num_heads = 16;
    c.vision.depth = 2;
    c.vision.intermediate_size = 2560;
  } else {
    throw Error("model: unknown preset '" + std::string(name) + "' (tiny, m3-attn)");
  }
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 5e6f;
  c.rotary_dim = c.head_dim / 2;
  c.sparse_local_block = 1;
  c.sparse_init_block = 0;
  c.sparse_score_type = ops::Pool::max;
  c.sparse_query_block = 1;
  c.torch_dtype = hal::DType::bf16;
  validate(c);
  return c;
}

}  // namespace msa::model
