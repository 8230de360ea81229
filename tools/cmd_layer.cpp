// msa layer: one MSA attention layer (indexer_score -> block_topk -> sparse attention)
// against the dense baseline at a given batch, context and query length. Reference
// configuration of the contract by default; --config key=value overrides fields.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "dist/world.h"
#include "hal/atomic_file.h"
#include "hal/error.h"
#include "hal/host_device.h"
#include "hal/registry.h"
#include "tools/commands.h"
#include "tools/layer_bench.h"
#include "tools/layer_dist.h"
#include "tools/layer_json.h"
#include "tools/layer_train.h"

namespace msa::cli {
namespace {

struct LayerOptions {
  std::string backend;
  int batch = 1;
  int64_t context = 32768;
  int q_len = 1;
  int iters = 10;
  bool check = false;
  std::vector<std::string> config;
  int gpus = 0;
  std::string parallel = "heads";
  std::string json;  // (optional) write the times here
  bool queued = false;
  bool backward = false;
  std::string selection = "random";
  std::string drafts = "random";
  std::string tuning;  // --tuning knob=value,...
  // Which of the options were given (CLI11 counts), for the rules of --backward.
  bool batch_given = false, q_len_given = false, selection_given = false, gpus_given = false, drafts_given = false;
};

// The times of a single-device run as a JSON object (for bench/layer_sweep.py).
// block_topk's share of the MSA layer's time with the ops run one by one (indexer + top-k
// + sparse attention); the perf target is < 15% at 128K and 1M, or top-k fused into the
// indexer (docs/perf-targets.md).
double topk_share(const LayerTimes& t) {
  const double layer = t.indexer_ms + t.topk_ms + t.sparse_ms;
  return layer > 0.0 ? t.topk_ms / layer : 0.0;
}

// What the select adds inside ops::indexer_topk (over indexer_score alone), as a share of
// the layer as run (indexer_topk + sparse attention). Medians of separate runs: may be
// slightly negative where the select costs less than the noise.
double fused_select_share(const LayerTimes& t) {
  return t.layer_ms() > 0.0 ? (t.fused_ms - t.indexer_ms) / t.layer_ms() : 0.0;
}

void write_json(const LayerOptions& o, const LayerConfig& c, const std::string& device, const LayerTimes& t,
                double attended) {
  nlohmann::json j;
  j["device"] = device;
  j["timing"] = o.queued ? "queued" : "single";
  j["batch"] = o.batch;
  j["context"] = o.context;
  j["q_len"] = o.q_len;
  j["drafts"] = o.drafts;
  j["config"] = layer_config_json(c);
  j["indexer_ms"] = t.indexer_ms;
  j["topk_ms"] = t.topk_ms;
  j["sparse_ms"] = t.sparse_ms;
  j["indexer_topk_ms"] = t.fused_ms;
  j["layer_ms"] = t.layer_ms();
  j["topk_share"] = topk_share(t);
  j["fused_select_share"] = fused_select_share(t);
  j["dense_ms"] = t.dense_ms;
  j["attended_fraction"] = attended;
  hal::write_file_atomic(o.json, j.dump(2) + "\n", "argument '--json'");
}

// Share of equal outputs and the NMSE of a distributed run against the single-device one.
int report_dist(const LayerOptions& o, const LayerProblem& prob) {
  const Parallel mode = parse_parallel(o.parallel);
  const int world = dist::world_size_from(o.gpus);
  const DistLayerResult d = run_layer_dist(prob, o.backend, world, mode, o.iters);
  // The single-device path on rank 0's device, same problem, same call.
  auto device = hal::create_device(o.backend == "cuda" ? "cuda:0" : o.backend);
  LayerRun one(*device, prob);
  one.run_once();
  std::vector<double> single;
  for (int i = 0; i < o.iters; ++i) {
    const LayerTimes t = one.time_sparse();
    single.push_back(t.indexer_ms + t.topk_ms + t.sparse_ms);
  }
  std::sort(single.begin(), single.end());
  const double t1 = single[single.size() / 2];
  const hal::HostTensor idx = one.download("block_idx"), out = one.download("sparse_out");
  int64_t same = 0;
  const int64_t k = idx.shape[2], rows = idx.shape[0] * idx.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    same +=
        std::equal(idx.data<int32_t>() + r * k, idx.data<int32_t>() + (r + 1) * k, d.block_idx.data<int32_t>() + r * k);
  const double err = layer_nmse(d.sparse_out, out);
  const bool bitwise = d.sparse_out.bytes == out.bytes;
  std::printf("msa layer on %d ranks of %s (%s-parallel): B=%d context=%lld q_len=%d\n", world, o.backend.c_str(),
              o.parallel.c_str(), o.batch, static_cast<long long>(o.context), o.q_len);
  std::printf("%-24s %10s\n", "phase (slowest rank)", "median ms");
  std::printf("%-24s %10.3f\n", "indexer_score", d.indexer_ms);
  std::printf("%-24s %10.3f\n", "block_topk", d.topk_ms);
  std::printf("%-24s %10.3f\n", "transfers", d.fetch_ms);
  std::printf("%-24s %10.3f\n", "sparse_block_attention", d.sparse_ms);
  std::printf("%-24s %10.3f\n", "layer step (wall)", d.layer_ms);
  std::printf("single device (%s): %.3f ms; speed-up %.2fx on %d ranks, scaling efficiency %.1f%%\n",
              device->name().c_str(), t1, t1 / d.layer_ms, world, 100.0 * t1 / (world * d.layer_ms));
  if (mode == Parallel::context)
    std::printf("blocks fetched between ranks per step: %lld\n", static_cast<long long>(d.fetched_blocks));
  const double tol = prob.cfg.dtype == hal::DType::f32 ? 1e-10 : 5e-5;
  std::printf(
      "check vs single device: block_idx identical in %.2f%% of %lld rows; sparse out %s, NMSE %.3g (tol %.1g)\n",
      rows ? 100.0 * same / rows : 100.0, static_cast<long long>(rows), bitwise ? "bitwise equal" : "differs", err,
      tol);
  return (same == rows && err <= tol) ? 0 : 1;
}

// The host copies of the problem (caches and queries) must fit the host's memory: checked
// before any is made, naming --context (and --batch).
void check_layer_memory(const LayerOptions& o, const LayerConfig& c) {
  const double slots = static_cast<double>(o.batch) * static_cast<double>((o.context + c.Bs - 1) / c.Bs * c.Bs);
  const double per_slot = (2.0 * c.Hkv * c.D + c.Di) * hal::dtype_size(c.dtype) + 4.0;
  const double queries = static_cast<double>(o.batch) * o.q_len * (c.Hq * c.D + c.Hi * c.Di) * hal::dtype_size(c.dtype);
  const double need = slots * per_slot + queries;
  const size_t host = hal::host_memory_bytes();
  if (host > 0 && need >= static_cast<double>(host))
    throw Error("argument '--context': " + std::to_string(o.batch) + " sequences of " + std::to_string(o.context) +
                " tokens need about " + std::to_string(static_cast<uint64_t>(need)) +
                " bytes of caches, more than the host's " + std::to_string(host) + " bytes of memory");
}

// --backward: one sequence from an empty cache (q_len = context), block_topk forcing the
// sink block 0 as bench_training.py's selections do unless --config n_sink says otherwise.
int run_backward(const LayerOptions& o, LayerConfig cfg) {
  if (o.gpus_given) throw Error("argument '--gpus': not available with --backward (one device)");
  if (o.batch_given && o.batch != 1) throw Error("argument '--batch': --backward times one sequence; must be 1");
  if (o.q_len_given && o.q_len != o.context)
    throw Error("argument '--q-len': --backward trains from an empty cache, q_len = --context (leave it out)");
  if (std::none_of(o.config.begin(), o.config.end(), [](const std::string& kv) { return kv.rfind("n_sink=", 0) == 0; }))
    cfg.n_sink = 1;
  // block_topk's parameter rule (docs/spec.md), which the synthetic selection keeps too.
  const int forced = cfg.n_sink + (cfg.n_local > 0 ? cfg.n_local - 1 + std::max(1, cfg.Qb / cfg.Bs) : 0);
  if (cfg.k < forced)
    throw Error("argument '--config k': " + std::to_string(cfg.k) + " is fewer than the " + std::to_string(forced) +
                " blocks block_topk forces (n_sink " + std::to_string(cfg.n_sink) + ", n_local " +
                std::to_string(cfg.n_local) + ", Qb " + std::to_string(cfg.Qb) + ")");
  LayerOptions host = o;
  host.batch = 1;
  host.q_len = static_cast<int>(std::min<int64_t>(o.context, INT32_MAX));
  check_layer_memory(host, cfg);
  LayerBackwardOptions b;
  b.backend = o.backend, b.context = o.context, b.iters = o.iters, b.check = o.check, b.queued = o.queued;
  b.selection = o.selection, b.json = o.json, b.tuning = o.tuning;
  return run_layer_backward(b, cfg);
}

int run_layer(const LayerOptions& o) {
  LayerConfig cfg = parse_layer_config(o.config);
  if (o.selection_given && !o.backward) throw Error("argument '--selection': only with --backward");
  const Drafts drafts = parse_drafts(o.drafts);
  if (o.drafts_given && o.backward) throw Error("argument '--drafts': not with --backward (it has no draft tokens)");
  if (o.batch < 0) throw Error("argument '--batch': must be >= 0");
  if (o.q_len < 0 || o.q_len > o.context) throw Error("argument '--q-len': must be in [0, context]");
  if (o.context < 1 || o.context > (int64_t{1} << 30)) throw Error("argument '--context': must be in [1, 2^30]");
  if (o.iters < 1) throw Error("argument '--iters': must be >= 1");
  if (o.backward) return run_backward(o, cfg);
  check_layer_memory(o, cfg);
  if (o.gpus > 0) {
    LayerProblem prob(cfg, o.batch, o.context, o.q_len, /*seed=*/1234, drafts);
    return report_dist(o, prob);
  }
  auto device = hal::create_device(o.backend);
  apply_tuning(*device, o.tuning);
  LayerProblem prob(cfg, o.batch, o.context, o.q_len, /*seed=*/1234, drafts);
  std::printf("msa layer on %s: B=%d context=%lld q_len=%d  Hq=%d Hkv=%d D=%d Hi=%d Di=%d Bs=%d k=%d Qb=%d %s ki=%s\n",
              device->name().c_str(), o.batch, static_cast<long long>(o.context), o.q_len, cfg.Hq, cfg.Hkv, cfg.D,
              cfg.Hi, cfg.Di, cfg.Bs, cfg.k, cfg.Qb, hal::dtype_name(cfg.dtype), hal::dtype_name(cfg.ki_dtype));
  LayerRun run(*device, prob);
  const LayerTimes t = run.time(o.iters, o.queued);
  const double sparse = t.layer_ms();
  std::printf("%-24s %10s  (%s)\n", "op", "median ms",
              o.queued ? "queued behind device work: device time without host enqueue cost"
                       : "single calls on an idle device: host enqueue cost included");
  std::printf("%-24s %10.3f\n", "indexer_score", t.indexer_ms);
  std::printf("%-24s %10.3f\n", "block_topk", t.topk_ms);
  std::printf("%-24s %10.3f  (indexer_score + block_topk in one call, fused where the backend can)\n", "indexer_topk",
              t.fused_ms);
  std::printf("%-24s %10.3f\n", "sparse_block_attention", t.sparse_ms);
  std::printf("%-24s %10.3f  (indexer_topk + sparse_block_attention)\n", "msa layer", sparse);
  std::printf("%-24s %10.3f\n", "dense_attention", t.dense_ms);
  const double attended = run.attended_fraction();
  std::printf("sparse/dense time ratio: %.3f (speed-up %.2fx); attended fraction of context: %.4f\n",
              sparse / t.dense_ms, t.dense_ms / sparse, attended);
  if (o.q_len > 1)
    std::printf("selection union per (sequence, KV head): %.1f blocks of q_len x k = %d (--drafts %s)\n",
                run.selection_union(), o.q_len * cfg.k, o.drafts.c_str());
  std::printf("block_topk share of the msa layer: %.1f%% (run as its own op)\n", 100.0 * topk_share(t));
  std::printf("select inside indexer_topk: %.3f ms over indexer_score alone, %.1f%% of the msa layer\n",
              t.fused_ms - t.indexer_ms, 100.0 * fused_select_share(t));
  if (!o.json.empty()) write_json(o, cfg, device->name(), t, attended);
  if (!o.check) return 0;
  auto ref = hal::create_device("cpu-ref");
  LayerRun ref_run(*ref, prob);
  ref_run.run_once();
  const LayerCompare cmp = compare_layers(run, ref_run);
  std::printf("check vs cpu-ref: block_idx %s; sparse out NMSE %.3g (tol %.1g); dense out NMSE %.3g (tol %.1g)\n",
              cmp.same_blocks ? "identical" : "DIFFERENT", cmp.sparse_nmse, cmp.tolerance, cmp.dense_nmse,
              cmp.tolerance);
  return cmp.ok() ? 0 : 1;
}

}  // namespace

Command add_layer(CLI::App& app) {
  auto o = std::make_shared<LayerOptions>();
  auto* sub = app.add_subcommand("layer", "Time one MSA attention layer against dense attention");
  add_backend_option(sub, o->backend);
  sub->add_option("--batch", o->batch, "Sequences in the batch")->capture_default_str();
  sub->add_option("--context", o->context, "Context length L per sequence (tokens, new ones included)")
      ->capture_default_str();
  sub->add_option("--q-len", o->q_len, "New query tokens per sequence (1 = decode)")->capture_default_str();
  sub->add_option("--iters", o->iters, "Timed iterations (median reported)")->capture_default_str();
  sub->add_option("--config", o->config,
                  "Override a field: Hq, Hkv, D, Hi, Di, Bs, k, n_sink, n_local, Qb, dtype, ki_dtype, mode, pool");
  sub->add_flag("--check", o->check, "Also run on cpu-ref at the same shape and compare");
  sub->add_option("--gpus", o->gpus,
                  "Split the layer over N ranks (devices 0..N-1 of the backend) and compare with one device")
      ->check(CLI::Range(1, dist::kMaxWorld));
  sub->add_option("--json", o->json, "Also write the times to this JSON file");
  sub->add_flag("--queued", o->queued,
                "Time each op group queued behind device work (device time, as a replayed graph of the step sees it)");
  add_tuning_option(sub, o->tuning);
  sub->add_option("--parallel", o->parallel, "With --gpus: heads or context")->capture_default_str();
  sub->add_flag("--backward", o->backward,
                "Time the layer's forward and backward for training (one sequence from empty, q_len = context) "
                "against dense attention forward + backward");
  sub->add_option("--drafts", o->drafts,
                  "With --q-len > 1: the new tokens' indexer queries independent (random) or a slow random walk "
                  "from each sequence's first token (walk: adjacent tokens select mostly the same blocks)")
      ->capture_default_str();
  sub->add_option("--selection", o->selection,
                  "With --backward: the synthetic selection the sparse ops read, random or correlated")
      ->capture_default_str();
  return {sub, [o, sub] {
            o->batch_given = sub->count("--batch") > 0;
            o->q_len_given = sub->count("--q-len") > 0;
            o->selection_given = sub->count("--selection") > 0;
            o->gpus_given = sub->count("--gpus") > 0;
            o->drafts_given = sub->count("--drafts") > 0;
            return run_layer(*o);
          }};
}

}  // namespace msa::cli
