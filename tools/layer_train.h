// The training problem behind `msa layer --backward`: one sequence from an empty cache
// (q_len = kv_len = L), the MSA layer's forward and backward ops on a given (synthetic)
// selection, and msa's dense attention forward and backward at the same shape, timed op
// by op on one device.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hal/device.h"
#include "hal/host_tensor.h"
#include "ops/args.h"
#include "tools/layer_bench.h"

namespace msa::cli {

// The ops in the order they run (each reads what the ones before wrote).
enum class TrainOp {
  indexer_score,
  block_topk,
  sparse_fwd,
  sparse_bwd,
  indexer_kl,
  dense_fwd,
  dense_bwd,
};
constexpr int kTrainOpCount = 7;
const char* train_op_name(TrainOp op);  // the ops:: name

struct TrainOpTime {
  double ms = 0;  // median of the timed calls
  int calls = 0;  // timed calls (after one warm-up)
};

class LayerTrainRun {
 public:
  // prob: batch 1, q_len == context. block_idx [NQ][Hs][k] i32 (the selection the sparse
  // ops read; block_topk writes its own); dout [T][Hq][D] of the problem's dtype.
  LayerTrainRun(hal::Device& device, const LayerProblem& prob, const hal::HostTensor& block_idx,
                const hal::HostTensor& dout);
  ~LayerTrainRun();
  // Every op once, in order; waits.
  void run_once();
  // Per op: one warm-up call, then `iters` event-timed calls, 2 when the warm-up took over
  // 0.5 s and 1 over 3 s (bench_training.py's Clock). queued: each timed call is enqueued
  // behind a 1 GiB device fill (as LayerRun::time).
  std::vector<TrainOpTime> time(int iters, bool queued);
  // "topk_idx", "out", "lse", "dq", "dk", "dv", "kl", "dqi", "dki", "dense_out", "dense_dq",
  // "dense_dk", "dense_dv" after a run.
  hal::HostTensor download(const std::string& what);
  // Bytes of the device tensors.
  size_t device_bytes() const;

 private:
  void run(TrainOp op);
  struct Impl;
  hal::Device& device_;
  std::unique_ptr<Impl> impl_;
};

// FLOPs per op (bench_training.py's counts): keys = attended tokens summed over tokens
// and selection heads, causal = sum over tokens of (t + 1). indexer_score 2*Hi*Di*causal;
// sparse forward 4*(Hq/Hs)*D*keys, backward 2.5x; indexer_kl 2*(Hq/Hs)*D*keys +
// 6*Di*keys; dense forward 4*Hq*D*causal, backward 2.5x; block_topk 0.
std::vector<double> train_op_flops(const LayerConfig& cfg, int Hs, double keys, double causal);

// `msa layer --backward` (tools/cmd_layer_backward.cpp): prints the table, writes `json`
// when given, and with `check` compares with cpu-ref (exit status 1 past a bound).
struct LayerBackwardOptions {
  std::string backend;
  int64_t context = 0;  // L = q_len = kv_len
  int iters = 10;
  bool check = false, queued = false;
  std::string selection = "random";  // cases::SyntheticSelection
  std::string json;
  std::string tuning;  // --tuning knob=value,...
};
int run_layer_backward(const LayerBackwardOptions& o, const LayerConfig& cfg);

}  // namespace msa::cli
