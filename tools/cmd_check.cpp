// msa check --backend NAME [--op OP[,OP...]] [--cases quick|full] [--match REGEX]
// [--tuning KNOB=V,...]: runs the
// cross-check case library on a backend against cpu-ref; exit code 1 on any failing case.
#include <iostream>

#include "check/check.h"
#include "hal/error.h"
#include "hal/registry.h"
#include "tools/commands.h"

namespace msa::cli {

Command add_check(CLI::App& app) {
  struct Options {
    std::string backend, op, cases = "quick", match, tuning;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("check", "Cross-check a backend against the cpu-ref reference");
  add_backend_option(sub, o->backend);
  sub->add_option("--op", o->op, "Only these ops (comma-separated names)");
  sub->add_option("--cases", o->cases, "Case set: quick or full")->capture_default_str();
  add_tuning_option(sub, o->tuning);
  sub->add_option("--match", o->match, "Only cases whose parameters (as printed) contain a match of this regex");
  return {sub, [o] {
            if (o->cases != "quick" && o->cases != "full")
              throw Error("argument '--cases': '" + o->cases + "' is not quick or full");
            auto dev = hal::create_device(o->backend);
            apply_tuning(*dev, o->tuning);
            std::cout << "msa check: " << dev->name() << " against cpu-ref, cases " << o->cases << "\n";
            const int failures = cases::run_check(*dev, o->cases, o->op, std::cout, o->match);
            return failures == 0 ? 0 : 1;
          }};
}

}  // namespace msa::cli
