// model::Weights: a model's configuration and its tensors in host memory, under their
// Hugging Face names. Loaded from a directory (config.json + *.safetensors), made from a
// preset with seeded random values, or saved to a directory (`msa init-weights`).
//
// Tensor names (N = layer, M = ViT block):
//   model.embed_tokens.weight                         [V][H]
//   model.layers.N.input_layernorm.weight             [H]        gemma RMSNorm
//   model.layers.N.self_attn.{q,k,v}_proj.weight      [Hq*D | Hkv*D | Hkv*D][H]
//   model.layers.N.self_attn.o_proj.weight            [H][Hq*D]
//   model.layers.N.self_attn.{q,k}_norm.weight        [D]        per-head gemma RMSNorm
//   model.layers.N.self_attn.indexer.q_proj.weight    [Hi*Di][H] (MSA layers only)
//   model.layers.N.self_attn.indexer.k_proj.weight    [Di][H]
//   model.layers.N.self_attn.indexer.{q,k}_norm.weight [Di]
//   model.layers.N.post_attention_layernorm.weight    [H]
//   model.layers.N.mlp.{gate,up}_proj.weight          [I][H];  mlp.down_proj.weight [H][I]
//   model.norm.weight [H];  lm_head.weight [V][H] (absent when tie_word_embeddings)
//   visual.patch_embed.proj.weight   [C][3*Tp*P*P] (Conv3d's [C][3][Tp][P][P] accepted)
//   visual.pre_layernorm.{weight,bias} [C]
//   visual.blocks.M.norm{1,2}.{weight,bias} [C]
//   visual.blocks.M.attn.qkv.{weight [3C][C], bias [3C]}
//   visual.blocks.M.attn.proj.{weight [C][C], bias [C]}
//   visual.blocks.M.mlp.fc1.{weight [Iv][C], bias [Iv]};  mlp.fc2.{weight [C][Iv], bias [C]}
//   visual.merger.ln_q.{weight,bias} [C]
//   visual.merger.mlp.0.{weight [4C][4C], bias [4C]};  visual.merger.mlp.2.{weight [H][4C], bias [H]}
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hal/export.h"
#include "hal/host_tensor.h"
#include "model/config.h"

namespace msa::model {

// One tensor the model expects.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor a model of this configuration has, in a fixed order.
MSA_API std::vector<TensorSpec> weight_specs(const Config& c);

struct MSA_API Weights {
  Config config;
  std::map<std::string, hal::HostTensor> tensors;

  // The tensor `name`; throws msa::Error naming it when absent.
  const hal::HostTensor& at(const std::string& name) const;
  // Total bytes of all tensors.
  size_t nbytes() const;
};

// Checks `tensors` against weight_specs(c): a missing, extra or mis-shaped tensor, or one
// whose dtype is not bf16/f16/f32, throws msa::Error naming the tensor. Reshapes a 5-D
// Conv3d patch-embedding weight to its 2-D matmul form in place.
MSA_API void check_weights(const Config& c, std::map<std::string, hal::HostTensor>& tensors);

// Loads `dir`/config.json and every `dir`/*.safetensors (a tensor in two files is an
// error), then check_weights. A folder replaced by save_weights during the load is read
// again: the result is one model's files.
MSA_API Weights load_weights(const std::string& dir);

// Seeded random weights of the right shapes, in c.torch_dtype: matrices with variance
// 1/fan_in, gemma norm weights near 0, LayerNorm weights near 1. Same seed, same bits.
MSA_API Weights init_weights(const Config& c, uint64_t seed);

// Writes `dir`/config.json and `dir`/model.safetensors, replacing `dir` whole (a reader
// sees the old model or the new one; a failed write leaves the old one). `dir` may be new
// or hold only config.json and *.safetensors files; anything else is an error.
MSA_API void save_weights(const Weights& w, const std::string& dir);

// "tiny" / "m3-attn" (seeded random weights) or a directory to load.
MSA_API Weights load_model(const std::string& model, uint64_t seed = 0);

}  // namespace msa::model
