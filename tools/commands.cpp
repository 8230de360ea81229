#include "tools/commands.h"

#include <cstdlib>

#include "hal/device.h"
#include "hal/error.h"

namespace msa::cli {

void add_backend_option(CLI::App* sub, std::string& backend) {
  const char* env = std::getenv("MSA_BACKEND");
  backend = env != nullptr && *env != '\0' ? env : "auto";
  sub->add_option("--backend,-b", backend,
                  "Device: auto, cpu-ref, cpu, cuda[:N], hip[:N], vulkan[:N] (env MSA_BACKEND)")
      ->capture_default_str();
}

void add_tuning_option(CLI::App* sub, std::string& tuning) {
  sub->add_option("--tuning", tuning,
                  "Kernel-choice knobs of the device, name=value[,name=value...] (msa devices lists them; "
                  "docs/tuning.md)");
}

void apply_tuning(hal::Device& device, const std::string& spec) {
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string pair = spec.substr(pos, end - pos);
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      throw ArgError("argument '--tuning': '" + pair + "' is not name=value");
    device.set_tuning(pair.substr(0, eq), pair.substr(eq + 1));
    pos = end + 1;
  }
}

std::vector<Command> all_commands(CLI::App& app) {
  return {add_devices(app), add_op(app), add_check(app), add_layer(app), add_run(app), add_init_weights(app)};
}

}  // namespace msa::cli
