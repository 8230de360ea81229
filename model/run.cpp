// `msa run`: load or make a model, build the (multimodal) prompts, prefill, decode, and
// report times per stage and per op, tokens/s, the attended fraction and the generated
// ids; with --check, the same steps on cpu-ref, logits compared step by step.
#include "model/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <ostream>
#include <sstream>

#include "dist/world.h"
#include "hal/error.h"
#include "hal/host_device.h"
#include "hal/registry.h"
#include "model/generate.h"
#include "model/head_parallel.h"
#include "model/logit_check.h"
#include "model/run_report.h"

namespace msa::model {
namespace {

double wall_clock_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::vector<int32_t>> make_prompts(const RunOptions& o, const Config& c, int64_t n_vision) {
  const int64_t base = o.prompt_ids.empty() ? o.prompt_tokens : static_cast<int64_t>(o.prompt_ids.size());
  MSA_CHECK_ARG(base >= 1 || n_vision >= 1, "run", "prompt_tokens", "the prompt is empty");
  for (int32_t t : o.prompt_ids)
    MSA_CHECK_ARG(
        t >= 0 && t < c.vocab_size, "run", "prompt_ids",
        "token " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < o.batch; ++b) {
    // Different lengths: sequence b is shorter by b / (2 * batch) of the longest.
    const int64_t len = std::max<int64_t>(n_vision > 0 ? 0 : 1, base - b * base / (2 * o.batch));
    std::vector<int32_t> text = o.prompt_ids.empty()
                                    ? random_tokens(c, len, o.seed * 1000003 + b)
                                    : std::vector<int32_t>(o.prompt_ids.begin(), o.prompt_ids.begin() + len);
    prompts.push_back(build_prompt(c, text, n_vision));
  }
  return prompts;
}

// The prompts, the KV cache and their positions are sized from --prompt-tokens, --batch,
// --gen and the video: checked before any is made. Positions are int32; the cache (at
// least K and V of every layer, 4 bytes per value at most) must fit the device.
void check_run_size(const RunOptions& o, const Config& c, int64_t n_vision, const hal::Device& device) {
  const int64_t base = o.prompt_ids.empty() ? o.prompt_tokens : static_cast<int64_t>(o.prompt_ids.size());
  MSA_CHECK_ARG(base >= 0, "run", "--prompt-tokens", "must be >= 0, got " + std::to_string(base));
  const int64_t per_seq = base + n_vision + o.gen;
  MSA_CHECK_ARG(
      per_seq <= INT32_MAX, "run", "--prompt-tokens",
      "a sequence of " + std::to_string(per_seq) + " tokens (prompt + video + --gen) is past the int32 positions");
  const double tokens = static_cast<double>(o.batch) * static_cast<double>(per_seq);
  const double per_token = 2.0 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 4.0 + 4.0;
  const size_t reported = device.info().memory_bytes;
  const size_t memory = reported > 0 ? reported : hal::host_memory_bytes();
  if (memory > 0 && tokens * per_token >= static_cast<double>(memory))
    throw_arg_error("run", "--prompt-tokens",
                    std::to_string(o.batch) + " sequences of " + std::to_string(per_seq) + " tokens need about " +
                        std::to_string(static_cast<uint64_t>(tokens * per_token)) +
                        " bytes of KV cache, more than the " + std::to_string(memory) + " bytes of " + device.name());
}

// Peak resident memory of this process in MB (Linux; 0 elsewhere).
double peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0.0;
}

// The backend of a distributed run: "auto" picks CUDA when it has devices, else "cpu".
std::string resolve_world_backend(const std::string& backend) {
  if (backend != "auto") return backend;
  for (const auto& b : hal::list_backends())
    if (b.name == "cuda" && !b.devices.empty()) return "cuda";
  return "cpu";
}

// One rank's share of a run: its device, its weights (all of them on a single device,
// its head shard in a distributed run) and its communicator (none on a single device).
struct RankRun {
  hal::Device& device;
  const Weights& weights;
  dist::Communicator* comm = nullptr;
};

int run_rank(const RunOptions& o, const Weights& w, const RankRun& rr, std::ostream& out) {
  hal::Device* device = &rr.device;
  const Config& c = w.config;
  std::optional<hal::DType> dtype;
  if (!o.dtype.empty()) dtype = hal::parse_dtype(o.dtype, "dtype");
  std::optional<hal::DType> ki_dtype;
  if (!o.ki_dtype.empty()) ki_dtype = hal::parse_dtype(o.ki_dtype, "ki_dtype");
  Model model(*device, rr.weights, dtype, o.profile, rr.comm);
  const bool check_here = o.check && (rr.comm == nullptr || rr.comm->rank() == 0);

  // Video -> patches (host) and the prompts around its placeholders.
  std::optional<VisionInput> vin;
  if (!o.frames.empty() || o.video_frames > 0) {
    MSA_CHECK_ARG(c.vision.enabled(), "run", "video", "model '" + o.model + "' has no vision encoder");
    const Video v = o.frames.empty() ? synthetic_video(o.video_frames, o.video_height, o.video_width, o.seed)
                                     : load_ppm_frames(o.frames);
    vin = patchify(v, c.vision);
  }
  const int64_t n_vision = vin ? vision_token_count(*vin, c.vision) : 0;
  MSA_CHECK_ARG(o.batch >= 1, "run", "--batch", "must be >= 1");
  check_run_size(o, c, n_vision, *device);
  const auto prompts = make_prompts(o, c, n_vision);

  RunReport rep;
  rep.options = &o;
  rep.config = &c;
  rep.device = device->name();
  if (rr.comm != nullptr) rep.device += " (rank 0 of " + std::to_string(rr.comm->world()) + ", head-parallel)";
  rep.dtype = model.dtype();
  rep.weight_bytes = model.weights().bytes();
  rep.n_vision = n_vision;
  if (vin) rep.grid = vin->grid;
  for (const auto& p : prompts) rep.prompt_lens.push_back(static_cast<int64_t>(p.size()));
  print_header(rep, out);

  // Vision: encode once, one copy of its rows per sequence.
  hal::Device::Owned vis_all;
  if (vin) {
    const double t0 = wall_clock_ms();
    vis_all = encode_video_rows(model, *vin, o.batch);
    rep.vision_ms = wall_clock_ms() - t0;
  }

  SessionOptions so;
  so.max_chunk = o.max_chunk;
  so.decode_steps = o.gen - 1;
  so.keep_logits = check_here;
  so.collect_selection = (o.profile || check_here) && !o.dense && c.num_sparse_layers() > 0;
  so.force_dense = o.dense;
  so.ki_dtype = ki_dtype;
  if (o.progress) so.progress = [&out](const std::string& line) { out << "  " << line << "\n" << std::flush; };
  Session sess(model, prompts, vis_all.tensor, so);
  rep.kv_bytes = sess.cache().bytes();
  rep.kv_pages = sess.cache().num_pages();

  // The reference: same weights, same prompts, on cpu-ref, fed the tested tokens.
  std::unique_ptr<hal::Device> ref_device;
  std::unique_ptr<Model> ref_model;
  std::unique_ptr<Session> ref_sess;
  hal::Device::Owned ref_vis_all;
  LogitCheck check(model.dtype());
  if (check_here) {
    ref_device = hal::create_device("cpu-ref");
    ref_model = std::make_unique<Model>(*ref_device, w, model.dtype(), false);
    if (vin) ref_vis_all = encode_video_rows(*ref_model, *vin, o.batch);
    SessionOptions rso = so;
    rso.progress = nullptr;
    ref_sess = std::make_unique<Session>(*ref_model, prompts, ref_vis_all.tensor, rso);
  }

  rep.generated.resize(o.batch);
  bool warned = false;
  auto warn_nonfinite = [&](int step, const StepResult& sr) {
    if (sr.finite_logits || warned) return;
    warned = true;
    std::cerr << "msa: warning: the logits of step " << step
              << " are not finite (NaN or Inf): the generated ids are not meaningful (are the weights finite?)\n";
  };
  double t0 = wall_clock_ms();
  StepResult r = sess.prefill();
  rep.prefill_ms = wall_clock_ms() - t0;
  rep.prefill_sel = r.selection;
  warn_nonfinite(0, r);
  if (check_here) check.step(0, r, ref_sess->prefill());
  for (int step = 1;; ++step) {
    for (int b = 0; b < o.batch; ++b) rep.generated[b].push_back(r.ids[b]);
    if (step == o.gen) break;
    const std::vector<int32_t> next = r.ids;
    t0 = wall_clock_ms();
    r = sess.decode(next);
    rep.decode_ms += wall_clock_ms() - t0;
    rep.decode_sel.merge(r.selection);
    rep.last_sel = r.selection;
    warn_nonfinite(step, r);
    if (check_here) check.step(step, r, ref_sess->decode(next));
    if (o.progress && (step % 16 == 0 || step + 1 == o.gen))
      out << "  decode step " << step << "/" << o.gen - 1 << "\n" << std::flush;
  }
  rep.decode_steps = o.gen - 1;
  rep.ops = model.profiler().entries();
  rep.workspace_bytes = model.workspace().bytes();
  rep.peak_rss_mb = peak_rss_mb();
  print_report(rep, out);

  if (!check_here) return 0;
  check.print(out);
  return check.passed() ? 0 : 1;
}

}  // namespace

int run_main(const RunOptions& o, std::ostream& out) {
  MSA_CHECK_ARG(o.gen >= 1, "run", "gen", "must be >= 1");
  const Weights w = load_model(o.model, o.seed);
  if (o.gpus == 0) {  // one device, no communicator
    auto device = hal::create_device(o.backend);
    return run_rank(o, w, RankRun{*device, w}, out);
  }
  // Head-parallel ranks: rank 0 prints (and checks); the others run silently.
  dist::World world(resolve_world_backend(o.backend), dist::world_size_from(o.gpus));
  std::vector<int> rc(static_cast<size_t>(world.size()), 0);
  world.run([&](dist::Communicator& comm) {
    const Weights shard = shard_weights(w, comm.rank(), comm.world());
    std::ostream silent(nullptr);
    rc[comm.rank()] = run_rank(o, w, RankRun{comm.device(), shard, &comm}, comm.rank() == 0 ? out : silent);
  });
  return rc[0];
}

int init_weights_main(const std::string& dir, const std::string& preset, uint64_t seed, std::ostream& out) {
  const Weights w = init_weights(preset_config(preset), seed);
  save_weights(w, dir);
  out << "wrote " << dir << "/config.json and model.safetensors (preset " << preset << ", seed " << seed << ", "
      << w.tensors.size() << " tensors, " << std::fixed << std::setprecision(1)
      << static_cast<double>(w.nbytes()) / (1 << 20) << " MiB)\n";
  return 0;
}

}  // namespace msa::model
