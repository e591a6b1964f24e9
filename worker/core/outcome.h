#pragma once
// How a launch ended on this node: each rank's exit, and the worker's own exit
// code and reason derived from them. Pure.

#include <string>
#include <vector>

#include "common/exit_codes.h"

namespace trellis::worker {

struct RankExit {
  int rank = 0;       // global rank
  int exit_code = 0;  // 128 + signal when killed by a signal
  int signal = 0;     // 0 when the rank exited
  bool after_stop = false;  // ended after the worker began stopping the ranks
  // Non-zero exits only: ScanLogTail of the end of the rank's log
  // (worker/core/failure_markers.h).
  std::vector<std::string> markers = {};
  std::string evidence = {};
};

// Exit code Slurm and shells use for a program that could not be started.
inline constexpr int kCannotStartExitCode = kExitCannotStart;

// Interprets a waitpid() status.
RankExit RankExitFromWaitStatus(int rank, int wait_status);

// "exited with 3", "was killed by signal 9 (SIGKILL)".
std::string DescribeRankExit(const RankExit& e);

struct WorkerOutcome {
  int exit_code = 0;
  std::string reason;
};

// exits are in the order the ranks ended. The worker exits 0 when every one of
// expected_ranks exited 0, else with the first failing rank's code: the first
// failure is the cause, later ones are usually the ranks the worker stopped.
// stop_cause (e.g. "worker received SIGTERM") is appended when non-empty.
WorkerOutcome DecideOutcome(const std::vector<RankExit>& exits, int expected_ranks,
                            const std::string& stop_cause);

}  // namespace trellis::worker
