#pragma once
// The verbs of `trellis`. Each Add*Command registers one subcommand on `app`;
// when it is the one given, its callback runs it and stores the exit code
// (cli/exit_status.h) in *exit_code. `global` is read when the verb runs, after
// parsing.

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/client.h"

namespace trellis::cli {

void AddSubmitCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
void AddListCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
void AddShowCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
void AddCancelCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
void AddWatchCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
void AddLogsCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
// nodes, quarantine, release, gate-report
void AddNodeCommands(CLI::App& app, const GlobalOptions& global, int* exit_code);
// report RUN --html FILE: one self-contained HTML page of the run
void AddReportCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);
// retry RUN, fork RUN --step N: a new run from a stored run's spec
void AddRetryForkCommands(CLI::App& app, const GlobalOptions& global, int* exit_code);
// export RUN[@STEP] OUT/: the trained model as safetensors (runs trellis-export)
void AddExportCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);

// doctor [SPEC]: the controller's checks of the site, each one line
void AddDoctorCommand(CLI::App& app, const GlobalOptions& global, int* exit_code);

// Reads a spec file ("-": standard input), refusing what the controller would
// refuse for its size (the message says so) without holding more in memory.
std::optional<std::string> ReadSpecFile(const std::string& path, std::string* error);

// Submits a spec's text with `overrides` (KEY=VALUE) set over it, the result
// opened by the comment `header`; prints as `trellis submit` does. An exit code.
// A refusal is printed, then `hint` of its message when that is not "".
int SubmitSpecText(const GlobalOptions& global, std::string text,
                   const std::vector<std::string>& overrides, const std::string& header,
                   bool dry_run, bool json,
                   const std::function<std::string(const std::string&)>& hint = nullptr);

}  // namespace trellis::cli
