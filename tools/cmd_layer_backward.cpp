// msa layer --backward: the MSA layer's forward and backward for training from an empty
// cache, op by op, on a synthetic selection, against msa's dense attention forward and
// backward at the same shape, with FLOP rates against the ceiling measured in this run.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "bench/ceiling.h"
#include "check/batch.h"
#include "check/synthetic_selection.h"
#include "hal/atomic_file.h"
#include "hal/error.h"
#include "hal/host_device.h"
#include "hal/registry.h"
#include "tools/commands.h"
#include "tools/layer_json.h"
#include "tools/layer_train.h"

namespace msa::cli {
namespace {

constexpr TrainOp kMsaOps[] = {TrainOp::indexer_score, TrainOp::block_topk, TrainOp::sparse_fwd, TrainOp::sparse_bwd,
                               TrainOp::indexer_kl};
constexpr TrainOp kDenseOps[] = {TrainOp::dense_fwd, TrainOp::dense_bwd};

struct Row {
  std::string op;
  double ms = 0, flops = 0;
  int calls = 0;
  double tflops() const { return ms > 0 ? flops / ms / 1e9 : 0.0; }
};

// The op rows, then the two layer sums.
std::vector<Row> make_rows(const std::vector<TrainOpTime>& t, const std::vector<double>& flops) {
  std::vector<Row> rows;
  auto sum = [&](const char* name, const auto& ops) {
    Row s{name};
    for (TrainOp op : ops) {
      const auto i = static_cast<size_t>(op);
      rows.push_back({op == TrainOp::indexer_kl ? "indexer_kl (sparse, dkl=1)" : train_op_name(op), t[i].ms, flops[i],
                      t[i].calls});
      s.ms += t[i].ms;
      s.flops += flops[i];
    }
    return s;
  };
  const Row msa = sum("msa layer fwd+bwd", kMsaOps);
  rows.push_back(msa);
  const Row dense = sum("dense layer fwd+bwd", kDenseOps);
  rows.push_back(dense);
  return rows;
}

const Row& find_row(const std::vector<Row>& rows, const std::string& op) {
  for (const Row& r : rows)
    if (r.op == op) return r;
  throw Error("msa layer --backward: no row '" + op + "'");
}

// With a host-accessible device the device tensors live in host memory too: checked
// before they are made, naming --context.
void check_device_memory(const LayerConfig& c, int64_t L, int64_t NQ, int Hs, bool host_accessible) {
  if (!host_accessible) return;
  const double es = static_cast<double>(hal::dtype_size(c.dtype)), T = static_cast<double>(L);
  const double slots = static_cast<double>((L + c.Bs - 1) / c.Bs * c.Bs), nblk = slots / c.Bs;
  const double need = T * c.Hq * c.D * (4 * es + 2 * 4.0) + T * c.Hq * 8.0        // q, dout, 2 outs; 2 dq; 2 lse
                      + slots * c.Hkv * c.D * (2 * es + 4 * 4.0)                  // K, V; 2 dK, 2 dV
                      + slots * c.Di * (es + 4.0) + T * c.Hi * c.Di * (es + 4.0)  // ki, dki; qi, dqi
                      + static_cast<double>(NQ) * c.Hi * nblk * 4.0               // block_score
                      + static_cast<double>(NQ) * Hs * (2.0 * c.k + 1) * 4.0;     // selections
  const size_t host = hal::host_memory_bytes();
  if (host > 0 && need >= static_cast<double>(host))
    throw Error("argument '--context': training on " + std::to_string(L) + " tokens needs about " +
                std::to_string(static_cast<uint64_t>(need)) + " bytes of device tensors, more than the host's " +
                std::to_string(host) + " bytes of memory");
}

void write_json(const LayerBackwardOptions& o, const LayerConfig& c, const std::string& device,
                const bench::Ceiling& ceil, double mean_keys, double overlap, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["device"] = device;
  j["mode"] = "backward";
  j["timing"] = o.queued ? "queued" : "single";
  j["context"] = o.context;
  j["q_len"] = o.context;
  j["selection"] = o.selection;
  j["config"] = layer_config_json(c);
  j["config"]["n_sink"] = c.n_sink;  // the selection's sink and local blocks
  j["config"]["n_local"] = c.n_local;
  j["ceiling_tflops"] = ceil.flops_per_s / 1e12;
  j["ceiling_how"] = ceil.how;
  j["mean_keys"] = mean_keys;
  j["adjacent_overlap"] = overlap;
  for (const Row& r : rows) {
    nlohmann::json x = {{"op", r.op}, {"ms", r.ms}, {"flops", r.flops}, {"tflops", r.tflops()}};
    if (r.calls > 0) x["calls"] = r.calls;
    if (ceil.flops_per_s > 0 && r.flops > 0) x["frac_of_ceiling"] = r.tflops() * 1e12 / ceil.flops_per_s;
    j["ops"].push_back(x);
  }
  j["layer_ms"] = find_row(rows, "msa layer fwd+bwd").ms;
  j["dense_layer_ms"] = find_row(rows, "dense layer fwd+bwd").ms;
  hal::write_file_atomic(o.json, j.dump(2) + "\n", "argument '--json'");
}

// The device's outputs against cpu-ref's on the same inputs: block_topk's selection
// exactly, the outputs and gradients by NMSE under the contract's bounds.
int check_against_reference(LayerTrainRun& run, const LayerProblem& prob, const hal::HostTensor& sel,
                            const hal::HostTensor& dout) {
  auto ref = hal::create_device("cpu-ref");
  LayerTrainRun ref_run(*ref, prob, sel, dout);
  ref_run.run_once();
  run.run_once();
  const bool f32 = prob.cfg.dtype == hal::DType::f32;
  const bool f32_index = f32 && prob.cfg.ki_dtype == hal::DType::f32;
  const bool same = run.download("topk_idx").bytes == ref_run.download("topk_idx").bytes;
  bool ok = same;
  std::printf("check vs cpu-ref: block_topk %s", same ? "identical" : "DIFFERENT");
  const std::pair<const char*, double> outs[] = {
      {"out", f32 ? 1e-10 : 5e-5},       {"dq", f32 ? 1e-10 : 1e-4},        {"dk", f32 ? 1e-10 : 1e-4},
      {"dv", f32 ? 1e-10 : 1e-4},        {"kl", f32_index ? 1e-10 : 1e-4},  {"dqi", f32_index ? 1e-10 : 1e-4},
      {"dki", f32_index ? 1e-10 : 1e-4}, {"dense_out", f32 ? 1e-10 : 5e-5}, {"dense_dq", f32 ? 1e-10 : 1e-4},
      {"dense_dk", f32 ? 1e-10 : 1e-4},  {"dense_dv", f32 ? 1e-10 : 1e-4}};
  for (const auto& [name, tol] : outs) {
    const double e = layer_nmse(run.download(name), ref_run.download(name));
    ok = ok && e <= tol;
    std::printf("; %s NMSE %.2g%s", name, e, e <= tol ? "" : " (OVER)");
  }
  std::printf(" (bounds %s)\n", f32 ? "1e-10" : "5e-5 out, 1e-4 gradients and kl");
  return ok ? 0 : 1;
}

}  // namespace

int run_layer_backward(const LayerBackwardOptions& o, const LayerConfig& c) {
  if (c.ki_dtype != hal::DType::bf16 && c.ki_dtype != hal::DType::f32)
    throw Error("argument '--config ki_dtype': --backward needs bf16 or f32 indexer keys (indexer_kl reads them)");
  const cases::SyntheticSelection kind = cases::parse_synthetic_selection(o.selection, "--selection");
  auto device = hal::create_device(o.backend);
  apply_tuning(*device, o.tuning);
  const int L = static_cast<int>(o.context);
  const cases::Batch batch({L}, {L}, c.Qb);
  const int Hs = c.mode == ops::SelectionMode::shared ? 1 : c.Hkv;
  check_device_memory(c, o.context, batch.NQ(), Hs, device->host_accessible());
  const hal::HostTensor sel = cases::synthetic_block_idx(batch, c.Bs, Hs, c.k, c.n_sink, c.n_local, kind, 77);
  LayerProblem prob(c, 1, o.context, L, /*seed=*/1234);
  const hal::HostTensor dout = layer_random_tensor(c.dtype, prob.q.shape, 4321);
  const double keys = cases::selection_stats(batch, c.Bs, sel).pairs, causal = cases::dense_pairs(batch);
  const double mean_keys = keys / (static_cast<double>(L) * Hs), overlap = cases::adjacent_overlap(batch, sel);
  std::printf(
      "msa layer --backward on %s: L=%d (one sequence from empty, q_len = kv_len)  Hq=%d Hkv=%d D=%d Hi=%d "
      "Di=%d Bs=%d k=%d n_sink=%d n_local=%d Qb=%d %s ki=%s\n",
      device->name().c_str(), L, c.Hq, c.Hkv, c.D, c.Hi, c.Di, c.Bs, c.k, c.n_sink, c.n_local, c.Qb,
      hal::dtype_name(c.dtype), hal::dtype_name(c.ki_dtype));
  std::printf(
      "selection %s (synthetic; block_topk is timed on the indexer's scores but not used): mean keys per "
      "query and head %.0f of %.0f causal, adjacent-query overlap %.2f\n",
      o.selection.c_str(), mean_keys, causal / L, overlap);
  const bench::Ceiling ceil = bench::measure_ceiling(*device);
  std::printf("ceiling: %.2f TFLOP/s (%s)\n", ceil.flops_per_s / 1e12, ceil.how.c_str());
  LayerTrainRun run(*device, prob, sel, dout);
  std::printf("device tensors: %.1f MiB\n", static_cast<double>(run.device_bytes()) / (1 << 20));
  const std::vector<Row> rows = make_rows(run.time(o.iters, o.queued), train_op_flops(c, Hs, keys, causal));
  std::printf("%-34s %10s %10s %8s %6s %5s  (%s)\n", "op", "median ms", "GFLOP", "TFLOP/s", "frac", "calls",
              o.queued ? "queued behind device work" : "single calls on an idle device");
  for (const Row& r : rows) {
    const double frac = ceil.flops_per_s > 0 ? r.tflops() * 1e12 / ceil.flops_per_s : 0.0;
    std::printf("%-34s %10.3f %10.3f %8.3f %6.3f ", r.op.c_str(), r.ms, r.flops / 1e9, r.tflops(), frac);
    if (r.calls > 0)
      std::printf("%5d\n", r.calls);
    else
      std::printf("%5s  (sum of the above)\n", "");
  }
  const double msa = find_row(rows, "msa layer fwd+bwd").ms, dense = find_row(rows, "dense layer fwd+bwd").ms;
  const double bwd = find_row(rows, "sparse_block_attention_backward").ms;
  const double dense_bwd = find_row(rows, "dense_attention_backward").ms;
  std::printf("sparse/dense fwd+bwd time ratio: %.3f (speed-up %.2fx); backward alone %.3f (speed-up %.2fx)\n",
              msa / dense, dense / msa, bwd / dense_bwd, dense_bwd / bwd);
  if (!o.json.empty()) write_json(o, c, device->name(), ceil, mean_keys, overlap, rows);
  return o.check ? check_against_reference(run, prob, sel, dout) : 0;
}

}  // namespace msa::cli
