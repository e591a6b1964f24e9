// trellis: the user CLI of Trellis. Wiring only: global flags, the verbs
// (cli/commands/), and CLI11's parse errors mapped to the usage exit code.

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/client.h"
#include "cli/commands/commands.h"
#include "cli/completion.h"
#include "cli/exit_status.h"
#include "common/auth.h"
#include "common/version.h"

int main(int argc, char** argv) {
  using namespace trellis::cli;
  CLI::App app{"trellis: run and watch training jobs on Slurm through trellis-controller"};
  app.name("trellis");
  app.require_subcommand(1);
  app.fallthrough();  // global flags may follow the verb
  app.set_version_flag("--version", trellis::kVersion);

  GlobalOptions global;
  app.add_option("--addr", global.addr,
                 "controller address: unix:PATH, or HOST:PORT with a token ($TRELLIS_TOKEN, "
                 "else " + trellis::auth::DefaultTokenPath() +
                     ") (default: $TRELLIS_ADDR, else the "
                 "address file of $TRELLIS_STATE_DIR (the controller's --state-dir), else " +
                     trellis::cli::DefaultAddress() + ")");
  app.add_option("--tls-ca", global.tls_ca,
                 "over TCP: CA certificate file to verify the controller's TLS certificate with "
                 "(default: $TRELLIS_TLS_CA, else plain TCP)");
  app.add_option("--timeout", global.timeout_s, "seconds allowed for each call (default 30)")
      ->check(CLI::PositiveNumber);

  int exit_code = kExitOk;
  AddSubmitCommand(app, global, &exit_code);
  AddListCommand(app, global, &exit_code);
  AddShowCommand(app, global, &exit_code);
  AddWatchCommand(app, global, &exit_code);
  AddLogsCommand(app, global, &exit_code);
  AddCancelCommand(app, global, &exit_code);
  AddNodeCommands(app, global, &exit_code);
  AddReportCommand(app, global, &exit_code);
  AddRetryForkCommands(app, global, &exit_code);
  AddExportCommand(app, global, &exit_code);
  AddDoctorCommand(app, global, &exit_code);
  // Last: it writes the completion of every verb above.
  std::string shell;
  CLI::App* completion = app.add_subcommand(
      "completion",
      "Print a shell completion script for trellis (verbs, flags, run ids, node names).\n"
      "Example: source <(trellis completion bash)   # in ~/.bashrc; zsh: completion zsh");
  completion->add_option("SHELL", shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  completion->callback([&app, &shell] {
    std::cout << (shell == "zsh" ? ZshCompletion(app) : BashCompletion(app));
  });

  try {
    app.parse(argc, argv);
  } catch (const UsageError& e) {
    PrintError(e.what());
    return kExitUsage;
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    std::vector<std::string> rest = app.remaining();
    if (app.get_subcommands().empty() && !rest.empty() && rest.front().rfind('-', 0) != 0) {
      PrintError("unknown verb '" + rest.front() +
                 "'; the verbs are submit, retry, fork, ls, show, watch, logs, cancel, nodes, "
                 "quarantine, release, gate-report, report, completion (see 'trellis --help')");
    } else {
      PrintError(std::string(e.what()) + " (see 'trellis --help')");
    }
    return kExitUsage;
  }
  return exit_code;
}
