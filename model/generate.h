// model::Model (a model resident on one device) and model::Session (a batch of
// sequences being generated): chunked prefill over the paged KV cache, then greedy
// decode. Also the multimodal prompt layout (text tokens around image placeholders).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hal/device.h"
#include "hal/export.h"
#include "model/decoder.h"
#include "model/device_weights.h"
#include "model/kv_cache.h"
#include "model/op_runner.h"
#include "model/profiler.h"
#include "model/video.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace msa::model {

// A model's weights on one device, with the scratch space, profiler and op runner that
// every session on it shares.
class MSA_API Model {
 public:
  // Uploads `w` to `device` in `dtype` (default: the config's torch_dtype). With
  // `profile`, every op is timed (see Profiler). With `comm`, `w` is this rank's shard
  // (model::shard_weights) and the row-parallel projections are all-reduced.
  Model(hal::Device& device, const Weights& w, std::optional<hal::DType> dtype = {}, bool profile = false,
        dist::Communicator* comm = nullptr);
  const Config& config() const { return config_; }
  hal::Device& device() const { return device_; }
  hal::DType dtype() const { return weights_.dtype(); }
  const DeviceWeights& weights() const { return weights_; }
  Workspace& workspace() { return ws_; }
  Profiler& profiler() { return prof_; }
  OpRunner& runner() { return run_; }
  // Runs the vision encoder on one video: [vision tokens][hidden_size] (stage "vision").
  hal::Device::Owned encode_video(const VisionInput& in);

 private:
  hal::Device& device_;
  Config config_;
  DeviceWeights weights_;
  Workspace ws_;
  Profiler prof_;
  OpRunner run_;
};

struct SessionOptions {
  int max_chunk = 8192;                              // most prompt tokens per prefill forward (over the batch)
  int decode_steps = 0;                              // decode steps planned (sizes the KV page pool)
  bool keep_logits = false;                          // return the logits of every step
  bool collect_selection = false;                    // return block_idx and the attended fraction
  bool force_dense = false;                          // dense attention in every layer (the baseline)
  bool poison_cache = false;                         // fill the cache with NaN bytes first (testing)
  std::optional<hal::DType> ki_dtype;                // indexer key dtype (default: bf16, or f32 for f32 models)
  std::function<void(const std::string&)> progress;  // (optional) one line per chunk
};

// The result of a prefill (for each sequence, its last prompt token) or a decode step.
struct StepResult {
  std::vector<int32_t> ids;                // greedy next token of each sequence
  bool finite_logits = true;               // false when a logit of the step is NaN or infinite
  std::vector<std::vector<float>> logits;  // [seq][vocab] with keep_logits
  std::vector<hal::HostTensor> block_idx;  // with collect_selection: per forward, per MSA layer
  SelectionStats selection;
};

class MSA_API Session {
 public:
  // `prompts`: one non-empty token list per sequence. `vis`: (optional) the vision rows
  // [R][hidden] for the image placeholder tokens of all prompts, in order (R must equal
  // their count). `model` and `vis` must outlive the session.
  Session(Model& model, std::vector<std::vector<int32_t>> prompts, const hal::Tensor& vis, SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Prefills every prompt in chunks of at most max_chunk tokens (stage "prefill").
  StepResult prefill();
  // Feeds one token per sequence (stage "decode").
  StepResult decode(std::span<const int32_t> tokens);

  int batch() const { return static_cast<int>(prompts_.size()); }
  const KvCache& cache() const { return *cache_; }

 private:
  void collect(const StepOutput& out, const std::vector<int>& rows_seq, StepResult& r);

  Model& model_;
  std::vector<std::vector<int32_t>> prompts_;
  hal::Tensor vis_;
  SessionOptions opt_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<int> seq_ids_;
};

// Encodes `in` once and returns its rows `copies` times over ([copies * tokens][hidden]):
// the `vis` of a session whose `copies` prompts each hold the video's placeholders.
MSA_API hal::Device::Owned encode_video_rows(Model& model, const VisionInput& in, int copies);

// Greedy generation: prefill, then n - 1 decode steps (n tokens per sequence).
struct GenerateResult {
  std::vector<std::vector<int32_t>> tokens;             // [seq][n]
  std::vector<std::vector<std::vector<float>>> logits;  // [step][seq][vocab] (keep_logits)
  SelectionStats prefill_selection, decode_selection;
  double prefill_ms = 0.0, decode_ms = 0.0;  // wall time (steady clock)
};
MSA_API GenerateResult generate(Session& s, int n);

// The prompt of a multimodal request: the vision placeholders first (`n_vision` copies
// of image_token_id), then the text tokens.
MSA_API std::vector<int32_t> build_prompt(const Config& c, std::span<const int32_t> text, int64_t n_vision);

// `n` seeded random text token ids (never the image placeholder).
MSA_API std::vector<int32_t> random_tokens(const Config& c, int64_t n, uint64_t seed);

}  // namespace msa::model
