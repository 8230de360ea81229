// msa: the command-line tool. Subcommands register themselves in commands.h order;
// every one takes --backend (default: $MSA_BACKEND, else auto). msa::Error -> exit 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <new>

#include "hal/error.h"
#include "hal/version.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"msa: MiniMax-style sparse attention runtime"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.set_version_flag("--version", std::string("msa ") + msa::version(), "Print the msa version and exit");
  std::vector<msa::cli::Command> commands = msa::cli::all_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (auto& c : commands)
      if (c.sub->parsed()) {
        const int rc = c.run();
        // Output that could not be written (a full disk, a closed pipe) is an error.
        std::cout.flush();
        if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout))
          throw msa::Error("cannot write the standard output");
        return rc;
      }
  } catch (const msa::Error& e) {
    std::fprintf(stderr, "msa: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {  // a size from the input that no check bounded
    std::fprintf(stderr, "msa: error: out of host memory: the arguments ask for more memory than is available\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "msa: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
