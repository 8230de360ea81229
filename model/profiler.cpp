#include "model/profiler.h"

#include <algorithm>

namespace msa::model {

size_t Profiler::begin(const char* name) {
  if (used_ * 2 + 2 > events_.size()) {
    events_.push_back(device_.create_event());
    events_.push_back(device_.create_event());
  }
  if (pending_.size() <= used_) {
    pending_.resize(used_ + 1);
    pending_stage_.resize(used_ + 1);
  }
  pending_[used_] = name;
  pending_stage_[used_] = stage_;
  device_.stream().record(*events_[used_ * 2]);
  return used_++;
}

void Profiler::end(size_t i) {
  device_.stream().record(*events_[i * 2 + 1]);
  // Bound the number of events in flight (each holds device resources on GPUs).
  if (used_ >= 4096) flush();
}

void Profiler::flush() {
  if (!enabled_ || used_ == 0) return;
  device_.stream().synchronize();
  for (size_t i = 0; i < used_; ++i) {
    Entry& e = acc_[{pending_stage_[i], pending_[i]}];
    e.stage = pending_stage_[i];
    e.op = pending_[i];
    e.calls += 1;
    e.ms += events_[i * 2 + 1]->elapsed_ms(*events_[i * 2]);
  }
  used_ = 0;
}

std::vector<Profiler::Entry> Profiler::entries() const {
  std::vector<Entry> v;
  for (const auto& [key, e] : acc_) v.push_back(e);
  std::stable_sort(v.begin(), v.end(),
                   [](const Entry& a, const Entry& b) { return a.stage != b.stage ? a.stage < b.stage : a.ms > b.ms; });
  return v;
}

double Profiler::total_ms(const std::string& stage) const {
  double t = 0.0;
  for (const auto& [key, e] : acc_)
    if (stage.empty() || e.stage == stage) t += e.ms;
  return t;
}

void Profiler::reset() {
  flush();
  acc_.clear();
}

}  // namespace msa::model
