#pragma once
// Certified return (pure): a node whose quarantine expired stays out
// ("checking", quarantine.h) until a short Slurm job on it, the check,
// passes. What the job found comes back as a file it writes: its exit code
// on the first line, the tail of its output after it. A pass ends the
// quarantine (probation, strikes kept); a fail, or no result within the
// timeout, is a new strike, which doubles the time out
// (docs/architecture.md, "Quarantine").

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "controller/core/quarantine.h"

namespace trellis::controller {

// What a check job wrote.
struct CheckResult {
  int exit_code = 0;
  std::string output;  // its last lines
};
// The result file's text: "<exit code>\n<output>"; an error names what is wrong.
absl::StatusOr<CheckResult> ParseCheckResult(const std::string& text);
// One line for `trellis nodes`: the output's last non-empty line, at most
// 200 characters; on a failure "exit N: " before it.
std::string CheckSummary(const CheckResult& result);

enum class CertifyAction {
  kNone,      // nothing to do now (not checking, or a check in flight)
  kSubmit,    // checking with no check since the expiry: start one
  kPass,      // the check in flight passed
  kFail,      // it failed
  kTimedOut,  // no result within certify_timeout: cancel it, it failed
};
struct CertifyDecision {
  CertifyAction action = CertifyAction::kNone;
  std::string summary;  // kPass, kFail, kTimedOut
};

// Whether the entry's newest check is in flight for its current expiry.
bool CheckInFlight(const QuarantineEntry& e);

// `found`: the in-flight check's result, when its file exists.
CertifyDecision DecideCertify(const QuarantineEntry& e, WallTime now,
                              const QuarantineConfig& config,
                              const std::optional<CheckResult>& found);

// The check job's batch script: runs `command` (shell code) on the node and
// writes "<exit code>\n<its last 40 lines>" to `result_path`, atomically.
std::string CheckScript(const std::string& node, const std::string& command,
                        const std::string& result_path);

// The check ended, as stored.
NodeCheck EndCheck(const NodeCheck& check, bool passed, std::string summary, WallTime now);

}  // namespace trellis::controller
