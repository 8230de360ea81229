// The subcommands of the msa CLI. Each add_<name> registers its options on `app` and
// returns the function that runs it (called after parsing).
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace msa::hal {
class Device;
}

namespace msa::cli {

struct Command {
  CLI::App* sub;
  std::function<int()> run;
};

// --backend with $MSA_BACKEND as the default, else "auto".
void add_backend_option(CLI::App* sub, std::string& backend);
// --tuning name=value[,name=value...]: the device's kernel-choice knobs (msa devices lists them).
void add_tuning_option(CLI::App* sub, std::string& tuning);
// Sets each knob of `spec` on `device`; ArgError naming '--tuning' on a malformed pair.
void apply_tuning(hal::Device& device, const std::string& spec);

Command add_devices(CLI::App& app);
Command add_op(CLI::App& app);
Command add_check(CLI::App& app);
Command add_layer(CLI::App& app);
Command add_run(CLI::App& app);
Command add_init_weights(CLI::App& app);

std::vector<Command> all_commands(CLI::App& app);

}  // namespace msa::cli
