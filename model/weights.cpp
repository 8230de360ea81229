// Weight names and shapes, checking, loading and saving.
#include "model/weights.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "hal/atomic_file.h"
#include "hal/error.h"
#include "hal/safetensors.h"

namespace msa::model {
namespace {

namespace fs = std::filesystem;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const char* kPatchEmbed = "visual.patch_embed.proj.weight";

bool is_model_file(const fs::path& p) { return p.filename() == "config.json" || p.extension() == ".safetensors"; }

// Device and inode of a folder (zeros when it does not exist).
using FolderId = std::pair<uint64_t, uint64_t>;
FolderId folder_id(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

}  // namespace

std::vector<TensorSpec> weight_specs(const Config& c) {
  const int64_t H = c.hidden_size, V = c.vocab_size, D = c.head_dim, I = c.intermediate_size;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t Hi = c.sparse_num_index_heads, Di = c.sparse_index_dim;
  std::vector<TensorSpec> s;
  s.push_back({"model.embed_tokens.weight", {V, H}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s.push_back({p + "input_layernorm.weight", {H}});
    s.push_back({p + "self_attn.q_proj.weight", {Hq * D, H}});
    s.push_back({p + "self_attn.k_proj.weight", {Hkv * D, H}});
    s.push_back({p + "self_attn.v_proj.weight", {Hkv * D, H}});
    s.push_back({p + "self_attn.o_proj.weight", {H, Hq * D}});
    s.push_back({p + "self_attn.q_norm.weight", {D}});
    s.push_back({p + "self_attn.k_norm.weight", {D}});
    if (!c.is_dense_layer(l)) {
      s.push_back({p + "self_attn.indexer.q_proj.weight", {Hi * Di, H}});
      s.push_back({p + "self_attn.indexer.k_proj.weight", {Di, H}});
      s.push_back({p + "self_attn.indexer.q_norm.weight", {Di}});
      s.push_back({p + "self_attn.indexer.k_norm.weight", {Di}});
    }
    s.push_back({p + "post_attention_layernorm.weight", {H}});
    s.push_back({p + "mlp.gate_proj.weight", {I, H}});
    s.push_back({p + "mlp.up_proj.weight", {I, H}});
    s.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  s.push_back({"model.norm.weight", {H}});
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {V, H}});
  const VisionConfig& v = c.vision;
  if (v.enabled()) {
    const int64_t C = v.hidden_size, Iv = v.intermediate_size, M = C * v.merge_tokens();
    s.push_back({kPatchEmbed, {C, v.patch_dim()}});
    s.push_back({"visual.pre_layernorm.weight", {C}});
    s.push_back({"visual.pre_layernorm.bias", {C}});
    for (int b = 0; b < v.depth; ++b) {
      const std::string p = "visual.blocks." + std::to_string(b) + ".";
      s.push_back({p + "norm1.weight", {C}});
      s.push_back({p + "norm1.bias", {C}});
      s.push_back({p + "attn.qkv.weight", {3 * C, C}});
      s.push_back({p + "attn.qkv.bias", {3 * C}});
      s.push_back({p + "attn.proj.weight", {C, C}});
      s.push_back({p + "attn.proj.bias", {C}});
      s.push_back({p + "norm2.weight", {C}});
      s.push_back({p + "norm2.bias", {C}});
      s.push_back({p + "mlp.fc1.weight", {Iv, C}});
      s.push_back({p + "mlp.fc1.bias", {Iv}});
      s.push_back({p + "mlp.fc2.weight", {C, Iv}});
      s.push_back({p + "mlp.fc2.bias", {C}});
    }
    s.push_back({"visual.merger.ln_q.weight", {C}});
    s.push_back({"visual.merger.ln_q.bias", {C}});
    s.push_back({"visual.merger.mlp.0.weight", {M, M}});
    s.push_back({"visual.merger.mlp.0.bias", {M}});
    s.push_back({"visual.merger.mlp.2.weight", {H, M}});
    s.push_back({"visual.merger.mlp.2.bias", {H}});
  }
  return s;
}

const hal::HostTensor& Weights::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error("weights: tensor '" + name + "' is missing");
  return it->second;
}

size_t Weights::nbytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors) n += t.nbytes();
  return n;
}

void check_weights(const Config& c, std::map<std::string, hal::HostTensor>& tensors) {
  const auto specs = weight_specs(c);
  std::map<std::string, const TensorSpec*> want;
  for (const auto& s : specs) want[s.name] = &s;
  for (const auto& [name, t] : tensors) {
    if (!want.count(name))
      throw Error("weights: unexpected tensor '" + name + "' " + t.str() + " (not part of this configuration)");
  }
  for (const auto& s : specs) {
    auto it = tensors.find(s.name);
    if (it == tensors.end()) throw Error("weights: tensor '" + s.name + "' " + shape_str(s.shape) + " is missing");
    hal::HostTensor& t = it->second;
    if (t.dtype != hal::DType::bf16 && t.dtype != hal::DType::f16 && t.dtype != hal::DType::f32)
      throw Error("weights: tensor '" + s.name + "' has dtype " + hal::dtype_name(t.dtype) +
                  " (bf16, f16 or f32 expected)");
    // Conv3d weight [C][3][Tp][P][P] is the same bytes as the matmul weight [C][3*Tp*P*P].
    if (s.name == kPatchEmbed && t.shape.size() == 5) {
      const VisionConfig& v = c.vision;
      const std::vector<int64_t> conv = {v.hidden_size, v.in_channels, v.temporal_patch_size, v.patch_size,
                                         v.patch_size};
      if (t.shape == conv) t.shape = s.shape;
    }
    if (t.shape != s.shape)
      throw Error("weights: tensor '" + s.name + "' has shape " + shape_str(t.shape) + ", " + shape_str(s.shape) +
                  " expected");
  }
}

namespace {

Weights load_weights_once(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) throw Error("model: '" + dir + "' is not a directory (nor a preset: tiny, m3-attn)");
  Weights w;
  w.config = load_config((root / "config.json").string());
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") files.push_back(e.path());
  if (ec) throw Error("model: cannot list '" + dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error("model: no *.safetensors file in '" + dir + "'");
  for (const auto& f : files) {
    auto part = hal::read_safetensors(f.string());
    for (auto& [name, t] : part) {
      if (w.tensors.count(name))
        throw Error("weights: tensor '" + name + "' appears in more than one file (again in '" + f.filename().string() +
                    "')");
      w.tensors.emplace(name, std::move(t));
    }
  }
  check_weights(w.config, w.tensors);
  return w;
}

}  // namespace

void save_weights(const Weights& w, const std::string& dir) {
  fs::path root = fs::path(dir).lexically_normal();
  if (!root.has_filename()) root = root.parent_path();  // "dir/"
  std::error_code ec;
  if (fs::exists(root, ec)) {
    if (!fs::is_directory(root, ec)) throw Error("init-weights: argument 'DIR': '" + dir + "' is not a directory");
    // The folder is replaced whole: it may hold only what a model holds.
    for (const auto& e : fs::directory_iterator(root, ec))
      if (!is_model_file(e.path()))
        throw Error("init-weights: argument 'DIR': '" + dir + "' holds '" + clip(e.path().filename().string()) +
                    "', which is not part of a model (config.json, *.safetensors); nothing replaced");
  } else if (root.has_parent_path()) {
    fs::create_directories(root.parent_path(), ec);
    if (ec) throw Error("init-weights: cannot create directory '" + root.parent_path().string() + "': " + ec.message());
  }
  // Built in a folder beside `dir`, then swapped in: a reader sees the old model or the new.
  const fs::path staged = hal::make_temp_dir_beside(root.string());
  try {
    hal::write_file_atomic((staged / "config.json").string(), to_json(w.config).dump(2) + "\n", "init-weights");
    hal::write_safetensors((staged / "model.safetensors").string(), w.tensors, {{"format", "pt"}});
    hal::replace_dir(staged.string(), root.string());
  } catch (...) {
    fs::remove_all(staged, ec);
    throw;
  }
}

Weights load_weights(const std::string& dir) {
  // A folder swapped in by save_weights while it is read has a new identity: the read is
  // repeated, so the result is one model, never files of two.
  for (int attempt = 1;; ++attempt) {
    const FolderId before = folder_id(dir);
    try {
      Weights w = load_weights_once(dir);
      if (folder_id(dir) == before) return w;
    } catch (const Error&) {
      if (folder_id(dir) == before || attempt == 3) throw;
    }
    if (attempt == 3) throw Error("model: '" + dir + "' was replaced while being read, three times in a row");
  }
}

Weights load_model(const std::string& model, uint64_t seed) {
  if (is_preset(model)) return init_weights(preset_config(model), seed);
  return load_weights(model);
}

}  // namespace msa::model
