// model::Decoder: the text decoder of docs/model-spec.md over a paged KV cache. One
// forward() runs a packed, varlen batch of new tokens (a prefill chunk or a decode step)
// through embedding (+ scatter of vision tokens), every layer and, for the rows asked
// for, the final norm, LM head and argmax.
//
// Layer l: h = RMSNorm(x); q, k, v = h Wq, h Wk, h Wv; per-head RMSNorm of q and k;
// RoPE (first rotary_dim dims); kv_append; dense_attention (l < num_dense_layers) or
// the MSA path (index branch qi = h Wqi, ki = h Wki, normed and roped the same way,
// ki appended to the indexer key cache; indexer_score -> block_topk ->
// sparse_block_attention); x += attn Wo; x += down(silu(h2 Wg) * h2 Wu), h2 = RMSNorm(x).
#pragma once
#include <cstdint>
#include <vector>

#include "hal/export.h"
#include "hal/host_tensor.h"
#include "model/config.h"
#include "model/device_weights.h"
#include "model/kv_cache.h"
#include "model/op_runner.h"
#include "model/workspace.h"

namespace msa::model {

struct DecoderOptions {
  // Download every MSA layer's block_idx after each forward (for the attended fraction
  // and the cross-check; one extra synchronisation per forward).
  bool collect_selection = false;
  // Run the MSA layers with dense attention too (the dense baseline).
  bool force_dense = false;
};

// One packed batch of new tokens.
struct StepInput {
  std::vector<int> seqs;          // KV cache sequence ids, each at most once
  std::vector<int32_t> q_len;     // new tokens of each sequence (>= 1)
  std::vector<int32_t> tokens;    // the packed token ids, sum(q_len) of them
  Tensor vis;                     // (optional) [placeholders in tokens][hidden] vision rows
  std::vector<int32_t> out_rows;  // packed rows whose logits are wanted (ascending)
};

// What the attended fraction counts: per (query, selection head, MSA layer), the cached
// tokens the query attends to over its causal context (pos + 1).
struct SelectionStats {
  double fraction_sum = 0.0;  // sum of attended / context
  int64_t count = 0;          // terms of the sum
  double mean() const { return count > 0 ? fraction_sum / static_cast<double>(count) : 1.0; }
  void merge(const SelectionStats& o) {
    fraction_sum += o.fraction_sum;
    count += o.count;
  }
};

struct StepOutput {
  Tensor logits;  // [out_rows][vocab] activation dtype (workspace; valid until next forward)
  Tensor ids;     // [out_rows] i32 argmax of logits (workspace)
  // With collect_selection: block_idx [NQ][Hs][k] of each MSA layer, and the stats.
  std::vector<hal::HostTensor> block_idx;
  SelectionStats selection;
};

class MSA_API Decoder {
 public:
  // Everything given must outlive the decoder and live on one device.
  Decoder(const Config& config, const DeviceWeights& weights, KvCache& cache, Workspace& ws, OpRunner& run,
          DecoderOptions options = {});
  // Appends the new tokens to their sequences in the cache and runs the model over them.
  StepOutput forward(const StepInput& in);

 private:
  struct Batch;  // the per-forward index tensors and sizes
  void attention(int layer, const Batch& b, const Tensor& h, const Tensor& out, std::vector<Tensor>& selection);
  void index_selection(int layer, const Batch& b, const Tensor& h, const Tensor& block_idx);
  void mlp(int layer, const Batch& b, const Tensor& h, const Tensor& out);
  // Final norm, LM head and argmax of the rows in.out_rows of x.
  void head(const StepInput& in, const Tensor& x, StepOutput& so);

  const Config& c_;
  const DeviceWeights& w_;
  KvCache& cache_;
  Workspace& ws_;
  OpRunner& run_;
  DecoderOptions opt_;
};

}  // namespace msa::model
