// msa devices: compiled-in backends, the devices found, and why a backend is unavailable.
#include <cstdio>

#include "hal/registry.h"
#include "tools/commands.h"

namespace msa::cli {
namespace {

// The device's kernel-choice knobs: switches (with their variable) first, then test hooks.
void print_tuning(const hal::Device& dev) {
  const auto knobs = dev.tuning();
  if (knobs.empty()) return;
  std::printf("tuning of %s (docs/tuning.md):\n", dev.name().c_str());
  for (int hooks = 0; hooks < 2; ++hooks)
    for (const auto& k : knobs) {
      if (k.env.empty() != (hooks == 1)) continue;
      std::printf("  %-16s %-9s%s %-24s %s\n", k.name.c_str(), k.shown.c_str(), k.value == k.dflt ? " " : "*",
                  hooks ? "(test hook)" : k.env.c_str(), k.help.c_str());
    }
}

}  // namespace

Command add_devices(CLI::App& app) {
  auto* sub = app.add_subcommand("devices", "List backends, their devices, and why a backend is unavailable");
  auto backend = std::make_shared<std::string>();
  add_backend_option(sub, *backend);
  return {sub, [backend] {
            std::printf("%-8s %-9s %s\n", "backend", "compiled", "devices");
            for (const auto& s : hal::list_backends()) {
              if (s.devices.empty()) {
                std::printf("%-8s %-9s none: %s\n", s.name.c_str(), s.compiled ? "yes" : "no",
                            s.unavailable_reason.c_str());
                continue;
              }
              for (size_t i = 0; i < s.devices.size(); ++i)
                std::printf("%-8s %-9s %s  %s\n", i ? "" : s.name.c_str(), i ? "" : (s.compiled ? "yes" : "no"),
                            s.devices[i].c_str(), i < s.descriptions.size() ? s.descriptions[i].c_str() : "");
            }
            auto dev = hal::create_device(*backend);
            std::printf("\n--backend %s opens %s\n", backend->c_str(), dev->name().c_str());
            print_tuning(*dev);
            return 0;
          }};
}

}  // namespace msa::cli
