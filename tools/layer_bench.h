// The MSA-layer problem behind `msa layer`: a configuration, seeded random inputs for a
// decode or prefill step over a paged cache, and a run of the sparse path and the dense
// baseline on one device, timed per op.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hal/device.h"
#include "hal/host_tensor.h"
#include "ops/args.h"

namespace msa::cli {

// Reference configuration of the contract (M3): Hq 64, Hkv 4, D 128, Hi 4, Di 128,
// Bs 128, k 16, n_sink 0, n_local 1, Qb 1, bf16, pool max, per_kv_head.
struct LayerConfig {
  int Hq = 64, Hkv = 4, D = 128, Hi = 4, Di = 128, Bs = 128, k = 16, n_sink = 0, n_local = 1, Qb = 1;
  hal::DType dtype = hal::DType::bf16;
  hal::DType ki_dtype = hal::DType::bf16;
  ops::SelectionMode mode = ops::SelectionMode::per_kv_head;
  ops::Pool pool = ops::Pool::max;
};

// Parses "field=value" overrides; throws msa::Error naming an unknown field or bad value.
LayerConfig parse_layer_config(const std::vector<std::string>& overrides);

// A seeded random tensor as the problem's inputs are made (values in [-1, 1], never near 0).
hal::HostTensor layer_random_tensor(hal::DType dtype, std::vector<int64_t> shape, uint64_t seed);

// How the indexer queries of a sequence's q_len new tokens relate: independent random
// vectors, or a slow random walk from the first token's (adjacent tokens then select
// mostly the same blocks, as a model's draft tokens do).
enum class Drafts { random, walk };
Drafts parse_drafts(const std::string& v);  // throws msa::Error naming --drafts

// Host inputs of one step: B sequences of kv_len = context, q_len new tokens each.
struct LayerProblem {
  LayerProblem(const LayerConfig& cfg, int batch, int64_t context, int q_len, uint64_t seed,
               Drafts drafts = Drafts::random);
  LayerProblem() = default;  // filled in by hand (a rank's shard)
  LayerConfig cfg;
  int B = 0;
  int64_t context = 0;
  int q_len = 0;
  int64_t NQ = 0;
  hal::HostTensor q, k_cache, v_cache, qi, ki_cache, ki_scale, block_table, kv_len, cu_q;
};

struct LayerTimes {
  double indexer_ms = 0, topk_ms = 0, sparse_ms = 0, dense_ms = 0;
  double fused_ms = 0;  // ops::indexer_topk: both ops in one call (one kernel where fused); set by time()
  // The layer as the model runs it: indexer_topk, then sparse attention.
  double layer_ms() const { return fused_ms + sparse_ms; }
};

// Device tensors for one problem, and the four ops run on them.
class LayerRun {
 public:
  LayerRun(hal::Device& device, const LayerProblem& prob);
  ~LayerRun();
  // indexer_topk -> sparse_block_attention, then dense_attention; waits.
  void run_once();
  // Median time of each op over `iters` runs (after one warm-up run). queued: each timed
  // group is enqueued behind a 1 GiB device fill, so the host has queued every op before the
  // device reaches the first event: the times are device time and launch gaps, without
  // the host's enqueue cost (what a replayed CUDA graph of the step sees). Otherwise each
  // group starts on an idle device and holds the host's checks and launch latency too.
  LayerTimes time(int iters, bool queued = false);
  // One timed run of the sparse path only, op by op (indexer, top-k, sparse attention); waits.
  LayerTimes time_sparse(bool queued = false);
  // One timed ops::indexer_topk (ms); waits.
  double time_fused(bool queued = false);
  // Mean over (query block, KV head) rows of attended tokens / context.
  double attended_fraction();
  // Mean over (sequence, selection head) of the distinct blocks its tokens selected: k
  // when they all chose the same, q_len x k when no two chose one alike.
  double selection_union();
  hal::HostTensor download(const std::string& what);  // "block_idx", "sparse_out", "dense_out"
  hal::DType dtype() const { return prob_.cfg.dtype; }

 private:
  void busy_head();  // enqueues a 1 GiB device fill (see time)
  struct Impl;
  hal::Device& device_;
  const LayerProblem& prob_;
  std::unique_ptr<Impl> impl_;
};

struct LayerCompare {
  bool same_blocks = false;
  double sparse_nmse = 0, dense_nmse = 0, tolerance = 0;
  bool ok() const { return same_blocks && sparse_nmse <= tolerance && dense_nmse <= tolerance; }
};

// Normalised mean squared error of a against the reference b (inf on NaN).
double layer_nmse(const hal::HostTensor& a, const hal::HostTensor& b);

// Compares a run with a reference run of the same problem (outputs after run_once()).
LayerCompare compare_layers(LayerRun& run, LayerRun& ref);

}  // namespace msa::cli
