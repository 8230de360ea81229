#include "model/head_parallel.h"

#include <cstring>
#include <string>

#include "hal/error.h"

namespace msa::model {
namespace {

void require_divides(int64_t n, int world, const std::string& what) {
  MSA_CHECK_ARG(n % world == 0, "dist", "--gpus",
                std::to_string(world) + " ranks do not divide " + what + " = " + std::to_string(n));
}

// Rows [r*n/world, (r+1)*n/world) of a [n][...] tensor.
hal::HostTensor slice_rows(const hal::HostTensor& t, int rank, int world) {
  const int64_t n = t.shape[0], part = n / world;
  std::vector<int64_t> shape = t.shape;
  shape[0] = part;
  hal::HostTensor out(t.dtype, shape);
  const size_t row = t.nbytes() / static_cast<size_t>(n);
  std::memcpy(out.bytes.data(), t.bytes.data() + static_cast<size_t>(rank * part) * row, out.nbytes());
  return out;
}

// Columns [r*n/world, (r+1)*n/world) of a [m][n] matrix.
hal::HostTensor slice_cols(const hal::HostTensor& t, int rank, int world) {
  const int64_t m = t.shape[0], n = t.shape[1], part = n / world;
  hal::HostTensor out(t.dtype, {m, part});
  const size_t es = hal::dtype_size(t.dtype);
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(out.bytes.data() + static_cast<size_t>(i * part) * es,
                t.bytes.data() + static_cast<size_t>(i * n + rank * part) * es, static_cast<size_t>(part) * es);
  return out;
}

}  // namespace

model::Config shard_config(const model::Config& c, int world) {
  MSA_CHECK_ARG(world >= 1, "dist", "--gpus", "must be >= 1");
  require_divides(c.num_key_value_heads, world, "num_key_value_heads");
  require_divides(c.intermediate_size, world, "intermediate_size");
  model::Config s = c;
  s.num_attention_heads = c.num_attention_heads / world;
  s.num_key_value_heads = c.num_key_value_heads / world;
  s.intermediate_size = c.intermediate_size / world;
  // per_kv_head: index head g selects for KV head g, so index heads follow their KV
  // heads. shared (one index head): every rank runs the same selection.
  if (c.num_sparse_layers() > 0 && c.selection_mode() == ops::SelectionMode::per_kv_head)
    s.sparse_num_index_heads = c.sparse_num_index_heads / world;
  model::validate(s);
  return s;
}

model::Weights shard_weights(const model::Weights& w, int rank, int world) {
  const model::Config& c = w.config;
  model::Weights out;
  out.config = shard_config(c, world);
  const bool shard_index = c.num_sparse_layers() > 0 && c.selection_mode() == ops::SelectionMode::per_kv_head;
  for (const auto& [name, t] : w.tensors) {
    const bool text_layer = name.rfind("model.layers.", 0) == 0;
    if (!text_layer || world == 1) {
      out.tensors.emplace(name, t);
    } else if (name.ends_with("self_attn.q_proj.weight") || name.ends_with("self_attn.k_proj.weight") ||
               name.ends_with("self_attn.v_proj.weight") || name.ends_with("mlp.gate_proj.weight") ||
               name.ends_with("mlp.up_proj.weight") || (shard_index && name.ends_with("indexer.q_proj.weight"))) {
      // Column-parallel: this rank's output rows. (indexer.q_proj also ends with
      // "q_proj.weight" but not "self_attn.q_proj.weight".)
      out.tensors.emplace(name, slice_rows(t, rank, world));
    } else if (name.ends_with("self_attn.o_proj.weight") || name.ends_with("mlp.down_proj.weight")) {
      out.tensors.emplace(name, slice_cols(t, rank, world));  // row-parallel: all-reduced
    } else {
      out.tensors.emplace(name, t);  // norms, indexer key projection
    }
  }
  model::check_weights(out.config, out.tensors);
  return out;
}

}  // namespace msa::model
