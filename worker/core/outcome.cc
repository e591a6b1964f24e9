#include "worker/core/outcome.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"

namespace trellis::worker {

RankExit RankExitFromWaitStatus(int rank, int wait_status) {
  RankExit e;
  e.rank = rank;
  if (WIFSIGNALED(wait_status)) {
    e.signal = WTERMSIG(wait_status);
    e.exit_code = kExitSignalBase + e.signal;
  } else if (WIFEXITED(wait_status)) {
    e.exit_code = WEXITSTATUS(wait_status);
  } else {
    e.exit_code = 1;  // stopped/continued are not exits; callers never pass them
  }
  return e;
}

std::string DescribeRankExit(const RankExit& e) {
  if (e.signal != 0) {
    const char* abbrev = sigabbrev_np(e.signal);
    // The worker sends SIGUSR1 only as Slurm's wall-time warning; a rank it
    // killed did not handle it through its exit (it may come twice).
    return absl::StrCat("was killed by signal ", e.signal,
                        abbrev != nullptr ? absl::StrCat(" (SIG", abbrev, ")") : "",
                        e.signal == SIGUSR1 ? ", the wall-time warning, which a rank must handle "
                                              "until it is gone (README, \"Time limits\")"
                                            : "");
  }
  if (e.exit_code == kCannotStartExitCode) return "could not be started (127)";
  return absl::StrCat("exited with ", e.exit_code);
}

WorkerOutcome DecideOutcome(const std::vector<RankExit>& exits, int expected_ranks,
                            const std::string& stop_cause) {
  WorkerOutcome out;
  const RankExit* first_failure = nullptr;
  for (const RankExit& e : exits) {
    if (e.exit_code != 0) {
      first_failure = &e;
      break;
    }
  }
  if (first_failure != nullptr) {
    out.exit_code = first_failure->exit_code;
    out.reason = absl::StrCat("rank ", first_failure->rank, " ", DescribeRankExit(*first_failure));
  } else if (static_cast<int>(exits.size()) < expected_ranks) {
    out.exit_code = 1;
    out.reason =
        absl::StrCat("only ", exits.size(), " of ", expected_ranks, " ranks reported an exit");
  } else {
    out.exit_code = 0;
    out.reason =
        absl::StrCat("all ", exits.size(), exits.size() == 1 ? " rank" : " ranks", " exited 0");
  }
  if (!stop_cause.empty()) absl::StrAppend(&out.reason, " (", stop_cause, ")");
  return out;
}

}  // namespace trellis::worker
