#include "tools/commands.h"

#include <cstdlib>

namespace msa::cli {

void add_backend_option(CLI::App* sub, std::string& backend) {
  const char* env = std::getenv("MSA_BACKEND");
  backend = env != nullptr && *env != '\0' ? env : "auto";
  sub->add_option("--backend,-b", backend,
                  "Device: auto, cpu-ref, cpu, cuda[:N], hip[:N], vulkan[:N] (env MSA_BACKEND)")
      ->capture_default_str();
}

std::vector<Command> all_commands(CLI::App& app) {
  return {add_devices(app), add_op(app), add_check(app), add_layer(app), add_run(app), add_init_weights(app)};
}

}  // namespace msa::cli
