#include "controller/core/run_state.h"

#include <algorithm>
#include <string>

namespace trellis::controller {

const std::vector<RunStateInfo>& AllRunStates() {
  using S = RunState;
  // docs/architecture.md, "A run's life, as implemented": anything not listed is refused.
  static const std::vector<RunStateInfo> kTable = {
      {S::kQueued, "QUEUED", false, {S::kSubmitted, S::kCancelled, S::kFailed}},
      {S::kSubmitted, "SUBMITTED", false, {S::kGating, S::kRestarting, S::kCancelled}},
      // -> SUBMITTED: Slurm requeued the job (launch_requeue.cc); -> FAILED: a
      // path of the spec out of bounds when checked again at GO (launches.cc).
      {S::kGating, "GATING", false,
       {S::kRunning, S::kQueued, S::kRestarting, S::kSubmitted, S::kCancelled, S::kFailed}},
      {S::kRunning, "RUNNING", false,
       {S::kSucceeded, S::kRestarting, S::kSubmitted, S::kCancelled}},
      {S::kRestarting, "RESTARTING", false,
       {S::kGating, S::kQueued, S::kFailed, S::kSubmitted, S::kCancelled}},
      {S::kSucceeded, "SUCCEEDED", true, {}},
      {S::kFailed, "FAILED", true, {}},
      {S::kCancelled, "CANCELLED", true, {}},
  };
  return kTable;
}

const RunStateInfo& Info(RunState state) {
  return AllRunStates()[static_cast<size_t>(state)];
}

std::optional<RunState> ParseRunState(std::string_view name) {
  for (const auto& info : AllRunStates())
    if (info.name == name) return info.state;
  return std::nullopt;
}

absl::Status CheckTransition(RunState from, RunState to) {
  const auto& next = Info(from).next;
  if (std::find(next.begin(), next.end(), to) != next.end()) return absl::OkStatus();
  return absl::FailedPreconditionError("illegal run transition " + std::string(StateName(from)) +
                                       " -> " + std::string(StateName(to)));
}

}  // namespace trellis::controller
