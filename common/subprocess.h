#pragma once
// Runs a program with an argument vector (never through a shell), captures
// its output, and kills it when it outlives its deadline.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trellis {

struct CommandResult {
  int exit_code = 0;  // 128 + signal when killed by a signal
  std::string out;
  std::string err;
  bool timed_out = false;
};

struct CommandOptions {
  std::chrono::milliseconds timeout{30000};
  size_t max_output_bytes = 16 << 20;  // each of stdout and stderr
  std::map<std::string, std::string> extra_env;  // added to the inherited environment
};

// Errors only when the program cannot be started; a non-zero exit is a result.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         const CommandOptions& options = {});

}  // namespace trellis
