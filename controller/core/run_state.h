#pragma once
// The run state machine: one table, one function that applies it.

#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace trellis::controller {

enum class RunState {
  kQueued,
  kSubmitted,
  kGating,
  kRunning,
  kRestarting,
  kSucceeded,
  kFailed,
  kCancelled,
};

struct RunStateInfo {
  RunState state;
  std::string_view name;  // as stored and printed: "QUEUED"
  bool terminal;
  std::vector<RunState> next;
};

const RunStateInfo& Info(RunState state);
const std::vector<RunStateInfo>& AllRunStates();
inline std::string_view StateName(RunState s) { return Info(s).name; }
inline bool IsTerminal(RunState s) { return Info(s).terminal; }
std::optional<RunState> ParseRunState(std::string_view name);

// OK when the table allows from -> to; FailedPrecondition naming both otherwise.
absl::Status CheckTransition(RunState from, RunState to);

}  // namespace trellis::controller
