// model::Profiler: per-op device time, by stage ("vision", "prefill", "decode"). When
// enabled, every timed op is bracketed by two events on the device's stream; flush()
// synchronises and adds up the elapsed times. When disabled, ops just run.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hal/device.h"
#include "hal/export.h"

namespace msa::model {

class MSA_API Profiler {
 public:
  Profiler(hal::Device& device, bool enabled) : device_(device), enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // Ops timed from now on are accounted to `stage`.
  void set_stage(const std::string& stage) { stage_ = stage; }
  const std::string& stage() const { return stage_; }

  // Runs `f` (work enqueued on the device's stream), timing it as op `name`.
  template <class F>
  void op(const char* name, F&& f) {
    if (!enabled_) {
      f();
      return;
    }
    const size_t i = begin(name);
    f();
    end(i);
  }

  // Waits for the stream and accumulates the pending timings.
  void flush();

  struct Entry {
    std::string stage, op;
    int64_t calls = 0;
    double ms = 0.0;
  };
  // Accumulated times (call flush() first), stage by stage, longest first.
  std::vector<Entry> entries() const;
  // Total time of all ops of `stage` (every stage when empty).
  double total_ms(const std::string& stage = "") const;
  void reset();

 private:
  size_t begin(const char* name);
  void end(size_t i);

  hal::Device& device_;
  bool enabled_;
  std::string stage_ = "run";
  std::vector<std::unique_ptr<hal::Event>> events_;  // pairs: 2i = start, 2i+1 = end
  std::vector<std::string> pending_;                 // op name of pair i
  size_t used_ = 0;                                  // pairs in use
  std::map<std::pair<std::string, std::string>, Entry> acc_;
  std::vector<std::string> pending_stage_;
};

}  // namespace msa::model
