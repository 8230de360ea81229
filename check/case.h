// The cross-check case library shared by `msa check`, the GoogleTest suites and
// msa-bench (in the spirit of ggml's test-backend-ops). A Case is one op at one shape:
// it makes fresh seeded inputs, runs the op on a device through ops::, runs the same
// inputs on cpu-ref, and compares with the contract's metrics (docs/spec.md,
// "Cross-check tolerances"). The same Case, prepared once on a device, is what the
// benchmark times, so what is benchmarked is what is checked.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hal/device.h"
#include "hal/host_tensor.h"
#include "hal/op_id.h"

namespace msa::cases {

// How an output is compared with the reference.
enum class Metric {
  none,   // not compared (an intermediate of a chained case)
  nmse,   // global NMSE <= tol_global and every row (last dim) NMSE <= tol_row; NaN fails
          // (with row_floor > 0: see Compare::row_floor)
  lse,    // -inf exactly where the reference has -inf, else |x-ref| <= tol * max(1,|ref|)
  exact,  // bitwise identical
};

struct Compare {
  Metric metric = Metric::none;
  double tol_global = 0;  // nmse: global bound; lse: the relative bound
  double tol_row = 0;     // nmse: per-row bound
  // NaN where the reference has NaN (any NaN bits) passes: for cases with non-finite
  // inputs in attended slots (docs/spec.md, "Non-finite inputs"). Otherwise a NaN
  // reference element must be kept bit for bit (nmse) and a NaN never passes (lse).
  bool nan_rows = false;
  // nmse (gradients): a row's squared error is divided by max(its reference energy,
  // row_floor * the mean energy of the rows with nonzero reference), so a row far smaller
  // than the tensor's typical row is not failed on cancellation noise; and a row whose
  // reference is all zeros (a slot no query attended, an empty selection) must be exactly
  // zero. 0 = the plain per-row NMSE.
  double row_floor = 0;

  // The contract's bounds for an attention `out` of dtype t (1e-10/1e-8 f32, 5e-5/2e-4).
  static Compare out(hal::DType t);
  // The training contract's bounds for a gradient of inputs of dtype t (docs/training.md:
  // 1e-10/1e-8 f32, 1e-4/5e-3 bf16 and f16), with row_floor 1.
  static Compare grad(hal::DType t);
  // The contract's bounds for `lse` / `block_score` with inputs of dtype t.
  static Compare lse(hal::DType t);
  static Compare exact() { return {Metric::exact, 0, 0}; }
  static Compare nmse(double global, double row) { return {Metric::nmse, global, row}; }
};

enum class Role { in, out, inout };

// One tensor argument of a case: its contents (inputs) or its dtype/shape (outputs).
struct Slot {
  std::string name;
  Role role = Role::in;
  hal::DType dtype = hal::DType::f32;
  std::vector<int64_t> shape;
  // in/inout: the contents. With `tiled`, only a prefix tile that is repeated on the
  // device to fill the tensor (perf inputs too large to generate in full).
  hal::HostTensor host;
  bool tiled = false;
  bool absent = false;  // an optional argument that is not given
  Compare cmp;          // out/inout

  static Slot input(std::string name, hal::HostTensor t);
  static Slot output(std::string name, hal::DType dtype, std::vector<int64_t> shape, Compare c);
  static Slot inout(std::string name, hal::HostTensor t, Compare c);
  static Slot none(std::string name);
  int64_t numel() const;
  size_t nbytes() const;
};

// A case's inputs and outputs for one seed.
struct CaseData {
  std::vector<Slot> slots;
};

// The device tensors of a CaseData, by slot name (absent slots give an absent Tensor).
class Bound {
 public:
  Bound(const std::vector<Slot>& slots, std::vector<hal::Tensor> tensors)
      : slots_(&slots), tensors_(std::move(tensors)) {}
  hal::Tensor operator()(std::string_view name) const;

 private:
  const std::vector<Slot>* slots_;
  std::vector<hal::Tensor> tensors_;
};

// One op call bound to device tensors: `supports` asks the device ("" = ok), `run`
// enqueues it on the device's stream.
struct Launch {
  std::function<std::string()> supports;
  std::function<void()> run;
};

// Builds a Launch for ops::fn(device, args).
template <typename Args>
Launch make_launch(hal::Device& d, hal::OpId op, const Args& a, void (*fn)(hal::Device&, const Args&)) {
  return {[&d, op, a] { return d.supports(op, &a); }, [&d, a, fn] { fn(d, a); }};
}

// The outcome of checking one case on one device.
struct CheckResult {
  bool passed = false;
  bool skipped = false;    // the backend refused the case (supports()); not a failure
  double worst_error = 0;  // of the output closest to (or furthest past) its bound
  double tolerance = 0;    // that output's bound
  std::string message;     // why it failed / was skipped, or the metric that was worst
};

class PreparedCase;

class Case {
 public:
  virtual ~Case() = default;
  // The op under test (msa_layer reports sparse_block_attention).
  virtual hal::OpId op() const = 0;
  // The op's name, or the composite's ("msa_layer").
  virtual std::string name() const { return hal::op_name(op()); }
  // The parameters, e.g. "B=2 T=17 Hq=8 Hkv=2 D=64 Bs=64 Qb=1 dtype=bf16 mode=per_kv_head".
  virtual std::string vars() const = 0;
  // FLOPs that must be done (multiply-add = 2).
  virtual double flops() const = 0;
  // Bytes that must move: each input read once, each output written once (sparse
  // attention: only the selected blocks).
  virtual double bytes() const = 0;
  // Fresh inputs for `seed`; `perf` allows tiled (repeated) contents for large tensors
  // and skips the NaN slack slots.
  virtual CaseData make_data(uint64_t seed, bool perf) const = 0;
  // The op call on `dev` over the bound tensors.
  virtual Launch bind(hal::Device& dev, const Bound& t) const = 0;
  // (optional) A second call on the same inputs timed as the baseline (msa_layer: dense).
  virtual bool has_baseline() const { return false; }
  virtual Launch bind_baseline(hal::Device& dev, const Bound& t) const { return bind(dev, t); }
  // Extra figures the benchmark reports (e.g. distinct blocks per 64 tokens).
  virtual std::vector<std::pair<std::string, double>> counters() const { return {}; }
  // Figures read from a prepared case's outputs after it ran (e.g. msa_layer's selections).
  virtual std::vector<std::pair<std::string, double>> counters_after_run(PreparedCase&) const { return {}; }

  // (optional) A check among the device's own outputs, after the slot comparisons passed:
  // "" when it holds, else what failed. `got` holds the device's output of each slot
  // (empty for inputs); `ref` is the cpu-ref device.
  virtual std::string check_outputs(const CaseData& data, const std::vector<hal::HostTensor>& got,
                                    hal::Device& ref) const {
    (void)data, (void)got, (void)ref;
    return "";
  }

  // Runs on `dev` and on `ref` (cpu-ref) with the same fresh inputs and compares.
  CheckResult check(hal::Device& dev, hal::Device& ref) const;
  // Uploads `input_sets` input sets (seeds seed(), seed()+1, ...) for timing.
  std::unique_ptr<PreparedCase> prepare(hal::Device& dev, int input_sets = 1) const;

  uint64_t seed() const { return seed_; }
  void set_seed(uint64_t s) { seed_ = s; }

 private:
  uint64_t seed_ = 1;
};

// A case resident on a device: inputs uploaded, outputs allocated; run() enqueues the op
// once (rotating among the input sets) without synchronising.
class PreparedCase {
 public:
  virtual ~PreparedCase() = default;
  virtual void run() = 0;
  // The baseline call (Case::has_baseline) on the current input set.
  virtual void run_baseline() = 0;
  // "" when the device supports the case, else why not.
  virtual std::string unsupported() const = 0;
  // Bytes held on the device.
  virtual size_t device_bytes() const = 0;
  // Downloads a tensor of the input set last run (waits for the stream).
  virtual hal::HostTensor download(std::string_view slot) = 0;
};

// Runs `c` on `dev` over `data` (without asking supports()) and returns each slot's
// contents after the run (empty for inputs and absent slots); throws msa::Error when the
// run fails (an exception, a guard or an input overwritten). The training cases use it to
// compute the forward's outputs on cpu-ref.
std::vector<hal::HostTensor> run_outputs(const Case& c, hal::Device& dev, const CaseData& data);

using CaseList = std::vector<std::unique_ptr<Case>>;

// The cases of a set: "quick" (a few seconds on cpu-ref and lavapipe), "full" (the
// coverage of the contract, about a minute on cpu-ref), "perf" (benchmark shapes, the
// reference configuration). `op_filter`: "" for all, else a comma-separated list of op
// or case names. `scale` (perf only) multiplies context and chunk lengths so slow
// backends can run scaled-down versions (e.g. 1/64 on cpu-ref).
CaseList make_cases(std::string_view set, std::string_view op_filter = "", double scale = 1.0);

// True when `name` passes `op_filter` (as make_cases uses it).
bool matches_filter(std::string_view name, std::string_view op_filter);

}  // namespace msa::cases
