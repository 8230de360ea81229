// What `msa run` measured, and how it is printed (used by model/run.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "hal/dtype.h"
#include "model/config.h"
#include "model/decoder.h"
#include "model/profiler.h"
#include "model/run.h"

namespace msa::model {

struct RunReport {
  const RunOptions* options = nullptr;
  const Config* config = nullptr;
  std::string device;
  hal::DType dtype = hal::DType::bf16;
  size_t weight_bytes = 0, kv_bytes = 0, workspace_bytes = 0;
  int64_t kv_pages = 0;
  int64_t n_vision = 0;              // vision tokens per sequence
  std::array<int32_t, 3> grid{};     // video grid {t, h, w} in patches
  std::vector<int64_t> prompt_lens;  // per sequence, vision placeholders included
  double vision_ms = 0.0, prefill_ms = 0.0, decode_ms = 0.0;
  int decode_steps = 0;
  SelectionStats prefill_sel, decode_sel, last_sel;
  std::vector<Profiler::Entry> ops;
  std::vector<std::vector<int32_t>> generated;
  double peak_rss_mb = 0.0;
};

// Model, device, prompt shapes.
void print_header(const RunReport& r, std::ostream& out);
// Stage times, tokens/s, per-op table, attended fraction, memory, generated ids.
void print_report(const RunReport& r, std::ostream& out);

}  // namespace msa::model
