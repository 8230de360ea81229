// The `msa run` and `msa init-weights` subcommands, as functions the CLI (tools/) calls
// after parsing its flags. Both print to `out`, throw msa::Error for user errors.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "hal/export.h"

namespace msa::model {

struct RunOptions {
  std::string backend = "auto";             // device name for hal::create_device
  std::string model = "tiny";               // "tiny", "m3-attn" or a directory (config.json + *.safetensors)
  uint64_t seed = 0;                        // preset weights, prompt tokens and synthetic video
  int prompt_tokens = 512;                  // text tokens of the longest prompt (random ids)
  std::vector<int32_t> prompt_ids;          // (optional) explicit text prompt instead
  int video_frames = 0;                     // > 0: a synthetic video of this many frames ...
  int video_height = 56, video_width = 56;  // ... and this size in pixels
  std::vector<std::string> frames;          // (optional) .ppm frames instead of the synthetic video
  int gen = 16;                             // tokens generated per sequence (greedy)
  int batch = 1;                            // sequences; sequence b's text is shorter by b/(2*batch)
  int max_chunk = 8192;                     // prefill chunk size (tokens over the batch)
  std::string dtype;                        // activations: "" = the config's torch_dtype
  std::string ki_dtype;                     // indexer keys: "" = bf16 (f32 for f32 models), fp8_e4m3 or nvfp4
  bool dense = false;                       // dense attention in every layer (baseline)
  bool check = false;                       // also run on cpu-ref, compare every step's logits
  bool profile = true;                      // per-op timing table
  bool progress = true;                     // progress lines while running
  int gpus = 0;                             // > 0: head-parallel over this many ranks (devices 0..N-1)
};

// Runs the model; returns 0, or 1 when --check found a mismatch.
MSA_API int run_main(const RunOptions& o, std::ostream& out);

// Writes `dir`/config.json + model.safetensors with the preset's seeded weights.
MSA_API int init_weights_main(const std::string& dir, const std::string& preset, uint64_t seed, std::ostream& out);

}  // namespace msa::model
