// msa layer: one MSA attention layer (indexer_score -> block_topk -> sparse attention)
// against the dense baseline at a given batch, context and query length. Reference
// configuration of the contract by default; --config key=value overrides fields.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hal/error.h"
#include "hal/registry.h"
#include "tools/commands.h"
#include "tools/layer_bench.h"

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
};

int run_layer(const LayerOptions& o) {
  LayerConfig cfg = parse_layer_config(o.config);
  if (o.batch < 0) throw Error("argument '--batch': must be >= 0");
  if (o.q_len < 0 || o.q_len > o.context) throw Error("argument '--q-len': must be in [0, context]");
  if (o.context < 1 || o.context > (int64_t{1} << 30)) throw Error("argument '--context': must be in [1, 2^30]");
  if (o.iters < 1) throw Error("argument '--iters': must be >= 1");
  auto device = hal::create_device(o.backend);
  LayerProblem prob(cfg, o.batch, o.context, o.q_len, /*seed=*/1234);
  std::printf("msa layer on %s: B=%d context=%lld q_len=%d  Hq=%d Hkv=%d D=%d Hi=%d Di=%d Bs=%d k=%d Qb=%d %s ki=%s\n",
              device->name().c_str(), o.batch, static_cast<long long>(o.context), o.q_len, cfg.Hq, cfg.Hkv, cfg.D,
              cfg.Hi, cfg.Di, cfg.Bs, cfg.k, cfg.Qb, hal::dtype_name(cfg.dtype), hal::dtype_name(cfg.ki_dtype));
  LayerRun run(*device, prob);
  const LayerTimes t = run.time(o.iters);
  const double sparse = t.indexer_ms + t.topk_ms + t.sparse_ms;
  std::printf("%-24s %10s\n", "op", "median ms");
  std::printf("%-24s %10.3f\n", "indexer_score", t.indexer_ms);
  std::printf("%-24s %10.3f\n", "block_topk", t.topk_ms);
  std::printf("%-24s %10.3f\n", "sparse_block_attention", t.sparse_ms);
  std::printf("%-24s %10.3f\n", "msa layer (sum)", sparse);
  std::printf("%-24s %10.3f\n", "dense_attention", t.dense_ms);
  std::printf("sparse/dense time ratio: %.3f (speed-up %.2fx); attended fraction of context: %.4f\n",
              sparse / t.dense_ms, t.dense_ms / sparse, run.attended_fraction());
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
  sub->add_option("--context", o->context, "Context length L per sequence (tokens, new ones included)")->capture_default_str();
  sub->add_option("--q-len", o->q_len, "New query tokens per sequence (1 = decode)")->capture_default_str();
  sub->add_option("--iters", o->iters, "Timed iterations (median reported)")->capture_default_str();
  sub->add_option("--config", o->config,
                  "Override a field: Hq, Hkv, D, Hi, Di, Bs, k, n_sink, n_local, Qb, dtype, ki_dtype, mode, pool");
  sub->add_flag("--check", o->check, "Also run on cpu-ref at the same shape and compare");
  return {sub, [o] { return run_layer(*o); }};
}

}  // namespace msa::cli
