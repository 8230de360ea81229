// TEMPORARY while the case library and model land; replaced by cmd_check.cpp / cmd_run.cpp.
#include "hal/error.h"
#include "tools/commands.h"

namespace msa::cli {
Command add_check(CLI::App& app) {
  auto* sub = app.add_subcommand("check", "Cross-check a backend against cpu-ref");
  return {sub, []() -> int { throw Error("check: not built yet"); }};
}
Command add_run(CLI::App& app) {
  auto* sub = app.add_subcommand("run", "Run the multimodal model");
  return {sub, []() -> int { throw Error("run: not built yet"); }};
}
Command add_init_weights(CLI::App& app) {
  auto* sub = app.add_subcommand("init-weights", "Write preset weights");
  return {sub, []() -> int { throw Error("init-weights: not built yet"); }};
}
}  // namespace msa::cli
