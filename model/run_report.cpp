#include "model/run_report.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>

namespace msa::model {
namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

void print_header(const RunReport& r, std::ostream& out) {
  const Config& c = *r.config;
  const RunOptions& o = *r.options;
  out << "msa run: model " << o.model << " on " << r.device << " (" << hal::dtype_name(r.dtype) << " activations"
      << (o.dense ? ", dense baseline" : "") << ")\n";
  out << "  text: " << c.num_hidden_layers << " layers (" << c.num_dense_layers << " dense, " << c.num_sparse_layers()
      << " MSA), hidden " << c.hidden_size << ", Hq=" << c.num_attention_heads << " Hkv=" << c.num_key_value_heads
      << " D=" << c.head_dim << ", Hi=" << c.sparse_num_index_heads << " Di=" << c.sparse_index_dim
      << " Bs=" << c.sparse_block_size << " k=" << c.sparse_topk_blocks << " n_local=" << c.sparse_local_block
      << " n_sink=" << c.sparse_init_block << " Qb=" << c.sparse_query_block << ", vocab " << c.vocab_size << "\n";
  if (r.n_vision > 0)
    out << "  vision: depth " << c.vision.depth << ", " << c.vision.num_heads << " heads x " << c.vision.head_dim()
        << ", window " << c.vision.window << "; video grid " << r.grid[0] << "x" << r.grid[1] << "x" << r.grid[2]
        << " patches -> " << r.n_vision << " tokens per sequence\n";
  out << "  batch " << r.prompt_lens.size() << ", prompt tokens";
  for (int64_t n : r.prompt_lens) out << " " << n;
  out << "; " << o.gen << " tokens generated per sequence; prefill chunks <= " << o.max_chunk << "\n";
}

void print_report(const RunReport& r, std::ostream& out) {
  int64_t prompt = 0;
  for (int64_t n : r.prompt_lens) prompt += n;
  const int64_t B = static_cast<int64_t>(r.prompt_lens.size());
  const int64_t decoded = r.decode_steps * B;
  out << std::fixed;
  out << "\nstage        time ms     tokens    tokens/s\n";
  auto row = [&](const char* name, double ms, int64_t tokens) {
    out << std::left << std::setw(10) << name << std::right << std::setw(10) << std::setprecision(2) << ms
        << std::setw(11) << tokens << std::setw(12) << std::setprecision(1)
        << (ms > 0.0 ? static_cast<double>(tokens) * 1000.0 / ms : 0.0) << "\n";
  };
  if (r.n_vision > 0) row("vision", r.vision_ms, static_cast<int64_t>(r.grid[0]) * r.grid[1] * r.grid[2]);
  row("prefill", r.prefill_ms, prompt);
  row("decode", r.decode_ms, decoded);
  out << std::left << std::setw(10) << "total" << std::right << std::setw(10) << std::setprecision(2)
      << r.vision_ms + r.prefill_ms + r.decode_ms << "\n";
  if (r.n_vision > 0) out << "(vision tokens/s counts patches)\n";

  if (!r.ops.empty()) {
    // op -> stage -> entry, and per-stage totals.
    const std::vector<std::string> stages = {"vision", "prefill", "decode"};
    std::map<std::string, std::map<std::string, Profiler::Entry>> by_op;
    std::map<std::string, double> op_total;
    double total = 0.0;
    for (const auto& e : r.ops) {
      by_op[e.op][e.stage] = e;
      op_total[e.op] += e.ms;
      total += e.ms;
    }
    std::vector<std::pair<double, std::string>> order;
    for (const auto& [op, ms] : op_total) order.push_back({-ms, op});
    std::sort(order.begin(), order.end());
    out << "\nper-op time, ms (calls)\n" << std::left << std::setw(24) << "op" << std::right;
    for (const auto& s : stages) out << std::setw(20) << s;
    out << std::setw(9) << "share"
        << "\n";
    for (const auto& [neg, op] : order) {
      out << std::left << std::setw(24) << op << std::right;
      for (const auto& s : stages) {
        auto it = by_op[op].find(s);
        std::ostringstream cell;
        cell << std::fixed;
        if (it != by_op[op].end())
          cell << std::setprecision(3) << it->second.ms << " (" << it->second.calls << ")";
        else
          cell << "-";
        out << std::setw(20) << cell.str();
      }
      out << std::setw(8) << std::setprecision(1) << (total > 0 ? -neg * 100.0 / total : 0.0) << "%\n";
    }
  }

  if (r.prefill_sel.count > 0 || r.decode_sel.count > 0) {
    out << "\nattended fraction (tokens of the selected blocks / causal context, MSA layers): prefill "
        << std::setprecision(3) << r.prefill_sel.mean();
    if (r.decode_sel.count > 0) out << ", decode " << r.decode_sel.mean() << " (last step " << r.last_sel.mean() << ")";
    out << "\n";
  }
  out << "memory: weights " << std::setprecision(1) << mib(r.weight_bytes) << " MiB, KV cache " << mib(r.kv_bytes)
      << " MiB (" << r.kv_pages << " pages of " << r.config->sparse_block_size << " tokens), workspace "
      << mib(r.workspace_bytes) << " MiB, peak RSS " << r.peak_rss_mb << " MiB\n";
  out << "generated ids:\n";
  for (size_t b = 0; b < r.generated.size(); ++b) {
    out << "  seq " << b << ":";
    for (int32_t t : r.generated[b]) out << " " << t;
    out << "\n";
  }
  out << std::defaultfloat;
}

}  // namespace msa::model
