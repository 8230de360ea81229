// model::LogitCheck: the --check of `msa run`. Each step (prefill, then every decode
// step, both runs fed the same tokens) compares the tested backend's logits with
// cpu-ref's at the spec's output tolerance (global NMSE, and each sequence's logits as
// one row) and its MSA block selections with the reference's.
//
// The spec lets selections differ among near-tied blocks, and one different block
// changes a query's attention output well beyond the rounding tolerance; so a step over
// tolerance is blamed on the selection (reported, not failed) when some selection
// differed at or before it, and fails otherwise. The check also fails when fewer than
// `min_same_selection` of the (query, head) selections are identical.
#pragma once
#include <cstdint>
#include <iosfwd>

#include "hal/dtype.h"
#include "hal/export.h"
#include "model/generate.h"

namespace msa::model {

class MSA_API LogitCheck {
 public:
  explicit LogitCheck(hal::DType dtype);
  // Adds one step; `got` and `ref` come from sessions with keep_logits and collect_selection.
  void step(int index, const StepResult& got, const StepResult& ref);
  bool passed() const;
  // One summary line and the verdict line.
  void print(std::ostream& out) const;

  double tol = 0.0, row_tol = 0.0;  // global and per-sequence NMSE limits
  double min_same_selection = 0.95;

 private:
  int steps_ = 0;
  double max_nmse_ = 0.0;
  int worst_step_ = 0;
  int failed_steps_ = 0, selection_steps_ = 0;  // over tolerance: unexplained / after a selection difference
  int64_t sel_rows_ = 0, sel_same_ = 0;
  bool diverged_ = false;  // some selection differed so far
};

}  // namespace msa::model
