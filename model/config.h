// model::Config: the model's shape, read from a Hugging Face style config.json with the
// field names of MiniMax M3's config where one exists, plus the two built-in presets.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "hal/dtype.h"
#include "hal/export.h"
#include "ops/args.h"

namespace msa::model {

// The ViT ("visual" tensors). A model without vision has depth 0 and no visual weights.
struct VisionConfig {
  int hidden_size = 0;          // C; num_heads * head_dim
  int num_heads = 0;            // H (head_dim = C / H must be 64, 80 or 128 on GPUs)
  int depth = 0;                // Lv transformer blocks; 0 = no vision encoder
  int intermediate_size = 0;    // GELU MLP width
  int patch_size = 14;          // P (pixels per patch side)
  int temporal_patch_size = 2;  // frames per temporal patch
  int spatial_merge_size = 2;   // 2x2 patches merge into one text token
  int in_channels = 3;          // RGB
  int window = 4;               // temporal patches per attention window (8 frames)
  float rope_theta = 1e4f;      // rope_3d theta
  float layer_norm_eps = 1e-6f;

  bool enabled() const { return depth > 0; }
  int head_dim() const { return num_heads > 0 ? hidden_size / num_heads : 0; }
  // Pixels per patch: in_channels * temporal_patch_size * patch_size^2 (1176 in M3).
  int patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  // Patches per text token: spatial_merge_size^2.
  int merge_tokens() const { return spatial_merge_size * spatial_merge_size; }
};

struct Config {
  // Text decoder.
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;  // Hq
  int num_key_value_heads = 0;  // Hkv
  int head_dim = 0;             // D
  int intermediate_size = 0;    // SwiGLU width
  int vocab_size = 0;
  float rms_norm_eps = 1e-6f;
  float rope_theta = 5e6f;
  int rotary_dim = 0;  // RoPE on the first rotary_dim dims of each head (D/2 in M3)
  bool tie_word_embeddings = false;
  int num_dense_layers = 0;  // the first layers use dense attention

  // MSA (sparse) layers.
  int sparse_num_index_heads = 0;  // Hi (== Hkv: per_kv_head; == 1: shared)
  int sparse_index_dim = 0;        // Di
  int sparse_block_size = 128;     // Bs: KV block (and page) size in tokens
  int sparse_topk_blocks = 16;     // k
  int sparse_local_block = 1;      // n_local
  int sparse_init_block = 0;       // n_sink
  ops::Pool sparse_score_type = ops::Pool::max;
  int sparse_query_block = 1;  // Qb (extension; 1 = M3's token-level selection)

  int32_t image_token_id = -1;  // placeholder token replaced by vision tokens
  hal::DType torch_dtype = hal::DType::bf16;
  VisionConfig vision;

  int num_sparse_layers() const { return num_hidden_layers - num_dense_layers; }
  bool is_dense_layer(int layer) const { return layer < num_dense_layers; }
  ops::SelectionMode selection_mode() const {
    return sparse_num_index_heads == 1 && num_key_value_heads != 1 ? ops::SelectionMode::shared
                                                                   : ops::SelectionMode::per_kv_head;
  }
  // Index branch rotary dims: the main branch's, clipped to Di.
  int index_rotary_dim() const { return rotary_dim < sparse_index_dim ? rotary_dim : sparse_index_dim; }
};

// Most layers (num_hidden_layers, vision_config.depth) a config may have.
constexpr int kMaxLayers = 4096;

// Parses a config.json document. Missing optional fields take M3's values; a missing
// required field or a bad value throws msa::Error naming the field.
MSA_API Config parse_config(const nlohmann::json& j);
// Reads and parses `path` (a config.json file).
MSA_API Config load_config(const std::string& path);
// The config.json document of `c` (parse_config(to_json(c)) == c).
MSA_API nlohmann::json to_json(const Config& c);
// Checks every constraint between fields; throws msa::Error naming the field.
MSA_API void validate(const Config& c);

// Built-in presets: "tiny" (a few MB, CI-sized) and "m3-attn" (M3's attention shape).
// Throws msa::Error for another name.
MSA_API Config preset_config(std::string_view name);
// True when `name` names a preset.
MSA_API bool is_preset(std::string_view name);

}  // namespace msa::model
