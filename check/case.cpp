#include "check/case.h"

#include <algorithm>
#include <exception>

#include "check/compare.h"
#include "check/device_io.h"
#include "hal/error.h"

namespace msa::cases {

Compare Compare::out(hal::DType t) {
  return t == hal::DType::f32 ? Compare{Metric::nmse, 1e-10, 1e-8} : Compare{Metric::nmse, 5e-5, 2e-4};
}

Compare Compare::grad(hal::DType t) {
  Compare c = t == hal::DType::f32 ? Compare{Metric::nmse, 1e-10, 1e-8} : Compare{Metric::nmse, 1e-4, 5e-3};
  c.row_floor = 1.0;
  return c;
}

Compare Compare::lse(hal::DType t) { return {Metric::lse, t == hal::DType::f32 ? 1e-5 : 1e-3, 0}; }

Slot Slot::input(std::string name, hal::HostTensor t) {
  Slot s;
  s.name = std::move(name);
  s.role = Role::in;
  s.dtype = t.dtype;
  s.shape = t.shape;
  s.host = std::move(t);
  return s;
}

Slot Slot::output(std::string name, hal::DType dtype, std::vector<int64_t> shape, Compare c) {
  Slot s;
  s.name = std::move(name);
  s.role = Role::out;
  s.dtype = dtype;
  s.shape = std::move(shape);
  s.cmp = c;
  return s;
}

Slot Slot::inout(std::string name, hal::HostTensor t, Compare c) {
  Slot s = input(std::move(name), std::move(t));
  s.role = Role::inout;
  s.cmp = c;
  return s;
}

Slot Slot::none(std::string name) {
  Slot s;
  s.name = std::move(name);
  s.absent = true;
  return s;
}

int64_t Slot::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t Slot::nbytes() const { return absent ? 0 : static_cast<size_t>(numel()) * hal::dtype_size(dtype); }

hal::Tensor Bound::operator()(std::string_view name) const {
  for (size_t i = 0; i < slots_->size(); ++i)
    if ((*slots_)[i].name == name) return tensors_[i];
  throw Error("cases: no slot named '" + std::string(name) + "'");
}

namespace {

// One run of a case on one device: outputs downloaded, or why not.
struct RunOutcome {
  std::string skipped;               // the device's reason for refusing
  std::string error;                 // an exception, a guard or an input overwritten
  std::vector<hal::HostTensor> out;  // per slot (empty for inputs)
};

RunOutcome run_on(const Case& c, hal::Device& dev, const CaseData& data, bool ask_support) {
  RunOutcome r;
  std::vector<DeviceSlot> ds;
  std::vector<hal::Tensor> views;
  for (const Slot& s : data.slots) {
    ds.push_back(upload_slot(dev, s, true));
    views.push_back(ds.back().tensor);
  }
  const Bound bound(data.slots, views);
  Launch launch = c.bind(dev, bound);
  if (ask_support) {
    r.skipped = launch.supports();
    if (!r.skipped.empty()) return r;
  }
  try {
    launch.run();
    dev.stream().synchronize();
  } catch (const std::exception& e) {
    r.error = std::string("threw: ") + e.what();
    try {
      dev.stream().synchronize();
    } catch (const std::exception&) {
    }
    return r;
  }
  r.out.resize(data.slots.size());
  for (size_t i = 0; i < data.slots.size(); ++i) {
    const Slot& s = data.slots[i];
    if (s.absent) continue;
    const std::vector<uint8_t> raw = download_raw(dev, ds[i]);
    if (std::string bad = verify_raw(s, ds[i], raw); !bad.empty()) {
      r.error += (r.error.empty() ? "" : "; ") + bad;
      continue;
    }
    if (s.role != Role::in) r.out[i] = payload(s, raw);
  }
  return r;
}

}  // namespace

std::vector<hal::HostTensor> run_outputs(const Case& c, hal::Device& dev, const CaseData& data) {
  RunOutcome r = run_on(c, dev, data, false);
  if (!r.error.empty()) throw Error("cases: " + c.name() + " on " + dev.name() + ": " + r.error);
  return std::move(r.out);
}

CheckResult Case::check(hal::Device& dev, hal::Device& ref) const {
  CheckResult res;
  CaseData data;
  try {
    data = make_data(seed_, false);
  } catch (const std::exception& e) {
    res.message = std::string("making inputs threw: ") + e.what();
    return res;
  }
  RunOutcome got;
  try {
    got = run_on(*this, dev, data, true);
  } catch (const std::exception& e) {
    got.error = std::string("setup threw: ") + e.what();
  }
  if (!got.skipped.empty()) {
    res.passed = true;
    res.skipped = true;
    res.message = "skipped (" + got.skipped + ")";
    return res;
  }
  if (!got.error.empty()) {
    res.message = dev.name() + " " + got.error;
    return res;
  }
  RunOutcome want;
  try {
    want = run_on(*this, ref, data, false);
  } catch (const std::exception& e) {
    want.error = std::string("setup threw: ") + e.what();
  }
  if (!want.error.empty()) {
    res.message = "reference " + want.error;
    return res;
  }
  res.passed = true;
  double worst_ratio = -1;
  std::string failures;
  for (size_t i = 0; i < data.slots.size(); ++i) {
    const Slot& s = data.slots[i];
    if (s.absent || s.role == Role::in || s.cmp.metric == Metric::none) continue;
    const Verdict v = compare_tensors(s.name, got.out[i], want.out[i], s.cmp);
    if (!v.ok) {
      res.passed = false;
      failures += (failures.empty() ? "" : "; ") + v.what;
    }
    const double r = v.ratio();
    if (r > worst_ratio) {
      worst_ratio = r;
      res.worst_error = v.error;
      res.tolerance = v.tolerance;
      if (res.passed) res.message = v.what;
    }
  }
  if (!res.passed) {
    res.message = failures;
  } else {
    std::string why;
    try {
      why = check_outputs(data, got.out, ref);
    } catch (const std::exception& e) {
      why = std::string("checking the outputs threw: ") + e.what();
    }
    if (!why.empty()) {
      res.passed = false;
      res.message = why;
    }
  }
  return res;
}

namespace {

class Prepared final : public PreparedCase {
 public:
  Prepared(const Case& c, hal::Device& dev, int sets) : dev_(dev) {
    sets = std::max(sets, 1);
    data_.resize(static_cast<size_t>(sets));
    for (int k = 0; k < sets; ++k) {
      CaseData& d = data_[static_cast<size_t>(k)];
      d = c.make_data(c.seed() + static_cast<uint64_t>(k), true);
      std::vector<hal::Tensor> views;
      for (size_t i = 0; i < d.slots.size(); ++i) {
        Slot& s = d.slots[i];
        if (k > 0 && s.role == Role::out) {
          views.push_back(views_[0][i]);  // outputs are shared between input sets
          continue;
        }
        DeviceSlot ds = upload_slot(dev, s, false);
        bytes_ += ds.buffer ? ds.buffer->bytes() : 0;
        views.push_back(ds.tensor);
        slots_.push_back(std::move(ds));
        s.host = hal::HostTensor();  // the host copy is no longer needed
      }
      views_.push_back(views);
    }
    for (int k = 0; k < sets; ++k) {
      const Bound b(data_[static_cast<size_t>(k)].slots, views_[static_cast<size_t>(k)]);
      launches_.push_back(c.bind(dev, b));
      if (c.has_baseline()) baselines_.push_back(c.bind_baseline(dev, b));
    }
    unsupported_ = launches_[0].supports();
    // A baseline the device cannot run (dense attention over K/V past a binding limit)
    // leaves the case runnable: only run_baseline() refuses, with the reason.
    if (!baselines_.empty()) baseline_unsupported_ = baselines_[0].supports();
    dev.stream().synchronize();
  }
  void run() override {
    launches_[next_].run();
    last_ = next_;
    next_ = (next_ + 1) % launches_.size();
  }
  void run_baseline() override {
    if (baselines_.empty()) throw Error("cases: this case has no baseline");
    if (!baseline_unsupported_.empty()) throw Error("unsupported: baseline: " + baseline_unsupported_);
    baselines_[last_].run();
  }
  std::string unsupported() const override { return unsupported_; }
  size_t device_bytes() const override { return bytes_; }
  hal::HostTensor download(std::string_view slot) override {
    const Bound b(data_[last_].slots, views_[last_]);
    const hal::Tensor t = b(slot);
    if (!t.present()) throw Error("cases: slot '" + std::string(slot) + "' is absent");
    return hal::to_host(dev_, t);
  }

 private:
  hal::Device& dev_;
  std::vector<CaseData> data_;
  std::vector<DeviceSlot> slots_;
  std::vector<std::vector<hal::Tensor>> views_;
  std::vector<Launch> launches_, baselines_;
  std::string unsupported_;
  std::string baseline_unsupported_;
  size_t next_ = 0, last_ = 0, bytes_ = 0;
};

}  // namespace

std::unique_ptr<PreparedCase> Case::prepare(hal::Device& dev, int input_sets) const {
  return std::make_unique<Prepared>(*this, dev, input_sets);
}

}  // namespace msa::cases
