// msa run: the multimodal model end to end (prompt with video -> prefill -> greedy
// decode), and msa init-weights: write a preset's seeded weights as a model directory.
#include <iostream>

#include "dist/world.h"
#include "hal/error.h"
#include "model/run.h"
#include "tools/commands.h"

namespace msa::cli {
namespace {

// "FRAMES,H,W" -> three positive integers.
void parse_video(const std::string& s, model::RunOptions& o) {
  int f = 0, h = 0, w = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%d,%d,%d%c", &f, &h, &w, &tail) != 3 || f < 1 || h < 1 || w < 1)
    throw Error("argument '--video': '" + s + "' is not FRAMES,H,W with positive integers");
  o.video_frames = f, o.video_height = h, o.video_width = w;
}

}  // namespace

Command add_run(CLI::App& app) {
  auto o = std::make_shared<model::RunOptions>();
  auto video = std::make_shared<std::string>();
  auto frames = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("run", "Run the multimodal model: prompt (+ video) -> prefill -> greedy decode");
  add_backend_option(sub, o->backend);
  sub->add_option("--model", o->model, "tiny, m3-attn, or a directory with config.json + *.safetensors")
      ->capture_default_str();
  sub->add_option("--prompt-tokens", o->prompt_tokens, "Text tokens of the longest prompt")->capture_default_str();
  sub->add_option("--video", *video, "Synthetic video FRAMES,H,W (pixels)");
  sub->add_option("--frames", *frames, "Video frames as comma-separated .ppm files");
  sub->add_option("--gen", o->gen, "Tokens to generate per sequence")->capture_default_str();
  sub->add_option("--batch", o->batch, "Sequences of different lengths")->capture_default_str();
  sub->add_option("--max-chunk", o->max_chunk, "Prefill chunk size in tokens")->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of preset weights, prompt and synthetic video")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--dtype", o->dtype, "Activation dtype (f32, bf16, f16); default: the model's");
  sub->add_option("--ki-dtype", o->ki_dtype, "Indexer key cache dtype (bf16, f32, fp8_e4m3, nvfp4)");
  sub->add_option("--gpus", o->gpus,
                  "Head-parallel ranks on devices 0..N-1 of the backend (NCCL on cuda; a host group on cpu, cpu-ref)")
      ->check(CLI::Range(1, dist::kMaxWorld));
  sub->add_flag("--dense", o->dense, "Dense attention in every layer (the baseline)");
  sub->add_flag("--check", o->check, "Also run on cpu-ref and compare every step's logits and selections");
  sub->add_flag("--quiet", *quiet, "No progress lines or per-op table");
  return {sub, [o, video, frames, quiet] {
            if (!video->empty()) parse_video(*video, *o);
            if (!frames->empty()) {
              std::string cur;
              for (char c : *frames + ",") {
                if (c != ',') {
                  cur += c;
                  continue;
                }
                if (!cur.empty()) o->frames.push_back(cur);
                cur.clear();
              }
            }
            if (*quiet) o->progress = false, o->profile = false;
            return model::run_main(*o, std::cout);
          }};
}

Command add_init_weights(CLI::App& app) {
  struct Options {
    std::string dir, preset = "tiny";
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("init-weights", "Write a preset's seeded weights as a model directory");
  // Accepted like every subcommand's; weights are generated and written on the host.
  auto backend = std::make_shared<std::string>();
  add_backend_option(sub, *backend);
  sub->add_option("DIR", o->dir, "Output directory (config.json + model.safetensors)")->required();
  sub->add_option("--preset", o->preset, "tiny or m3-attn")->capture_default_str();
  sub->add_option("--seed", o->seed, "Weight seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  return {sub, [o] { return model::init_weights_main(o->dir, o->preset, o->seed, std::cout); }};
}

}  // namespace msa::cli
