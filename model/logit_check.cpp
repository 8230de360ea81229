#include "model/logit_check.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>

namespace msa::model {

LogitCheck::LogitCheck(hal::DType dtype) {
  const bool f32 = dtype == hal::DType::f32;
  tol = f32 ? 1e-10 : 5e-5;
  row_tol = f32 ? 1e-8 : 2e-4;
}

void LogitCheck::step(int index, const StepResult& got, const StepResult& ref) {
  ++steps_;
  int64_t differ = 0;
  for (size_t i = 0; i < ref.block_idx.size(); ++i) {
    // A head-parallel rank 0 holds the first Hs of the reference's selection heads.
    const auto& r = ref.block_idx[i];
    const int64_t nq = r.shape[0], hs_ref = r.shape[1], k = r.shape[2];
    const hal::HostTensor* g = i < got.block_idx.size() ? &got.block_idx[i] : nullptr;
    const bool comparable = g != nullptr && g->shape.size() == 3 && g->shape[0] == nq && g->shape[2] == k &&
                            g->shape[1] >= 1 && g->shape[1] <= hs_ref;
    const int64_t hs = comparable ? g->shape[1] : hs_ref;
    for (int64_t q = 0; q < nq; ++q)
      for (int64_t h = 0; h < hs; ++h) {
        const int32_t* want = r.data<int32_t>() + (q * hs_ref + h) * k;
        const bool same = comparable && std::equal(want, want + k, g->data<int32_t>() + (q * hs + h) * k);
        sel_same_ += same;
        differ += !same;
      }
    sel_rows_ += nq * hs;
  }
  diverged_ |= differ > 0;

  double num = 0.0, den = 0.0;
  bool bad_row = got.logits.size() != ref.logits.size();
  for (size_t b = 0; b < ref.logits.size() && !bad_row; ++b) {
    double rn = 0.0, rd = 0.0;
    const auto& g = got.logits[b];
    const auto& w = ref.logits[b];
    if (g.size() != w.size()) {
      bad_row = true;
      break;
    }
    for (size_t j = 0; j < w.size(); ++j) {
      const double d = static_cast<double>(g[j]) - w[j];
      rn += std::isnan(d) ? INFINITY : d * d;
      rd += static_cast<double>(w[j]) * w[j];
    }
    bad_row |= !(rn <= row_tol * rd);
    num += rn;
    den += rd;
  }
  const double e = bad_row && den == 0.0 ? INFINITY : (den > 0.0 ? num / den : (num > 0.0 ? INFINITY : 0.0));
  if (!(e <= max_nmse_)) {
    max_nmse_ = e;
    worst_step_ = index;
  }
  if (!(e <= tol) || bad_row) ++(diverged_ ? selection_steps_ : failed_steps_);
}

bool LogitCheck::passed() const {
  const bool selection_ok =
      sel_rows_ == 0 || static_cast<double>(sel_same_) >= min_same_selection * static_cast<double>(sel_rows_);
  return failed_steps_ == 0 && selection_ok;
}

void LogitCheck::print(std::ostream& out) const {
  out << "check vs cpu-ref (" << steps_ << " steps; NMSE <= " << tol << " per step, <= " << row_tol
      << " per sequence): max NMSE " << std::scientific << std::setprecision(2) << max_nmse_ << std::defaultfloat
      << " at step " << worst_step_;
  if (sel_rows_ > 0)
    out << "; selected blocks identical in " << std::fixed << std::setprecision(2)
        << 100.0 * static_cast<double>(sel_same_) / static_cast<double>(sel_rows_) << "% of " << sel_rows_
        << " (query, head) rows" << std::defaultfloat;
  out << "\n";
  if (selection_steps_ > 0)
    out << "  " << selection_steps_ << " step(s) over tolerance after a near-tie selection difference (allowed)\n";
  if (passed()) {
    out << "check: PASS\n";
  } else {
    out << "check: FAIL (";
    if (failed_steps_ > 0) out << failed_steps_ << " step(s) over tolerance with identical selections";
    if (failed_steps_ > 0 && sel_rows_ > 0 && static_cast<double>(sel_same_) < min_same_selection * sel_rows_)
      out << "; ";
    if (sel_rows_ > 0 && static_cast<double>(sel_same_) < min_same_selection * sel_rows_)
      out << "fewer than " << min_same_selection * 100 << "% identical selections";
    out << ")\n";
  }
}

}  // namespace msa::model
