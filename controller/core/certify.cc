#include "controller/core/certify.h"

#include <cstdlib>

#include "controller/core/batch_script.h"

namespace trellis::controller {

absl::StatusOr<CheckResult> ParseCheckResult(const std::string& text) {
  const size_t eol = text.find('\n');
  const std::string first = text.substr(0, eol);
  char* end = nullptr;
  const long code = std::strtol(first.c_str(), &end, 10);
  if (first.empty() || end == nullptr || *end != '\0' || code < 0 || code > 255)
    return absl::InvalidArgumentError(
        "check result: the first line must be an exit code 0..255, got '" + first.substr(0, 40) +
        "'");
  CheckResult r;
  r.exit_code = static_cast<int>(code);
  if (eol != std::string::npos) r.output = text.substr(eol + 1);
  return r;
}

std::string CheckSummary(const CheckResult& result) {
  std::string line;
  size_t end = result.output.size();
  while (end > 0 && line.empty()) {
    size_t start = result.output.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    line = result.output.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    end = start == 0 ? 0 : start - 1;
  }
  if (line.empty()) line = "no output";
  if (line.size() > 200) line = line.substr(0, 197) + "...";
  if (result.exit_code == 0) return line;
  return "exit " + std::to_string(result.exit_code) + ": " + line;
}

bool CheckInFlight(const QuarantineEntry& e) {
  const auto& c = e.last_check;
  return c && !c->ended && e.expiry && c->started >= *e.expiry && !e.released;
}

CertifyDecision DecideCertify(const QuarantineEntry& e, WallTime now,
                              const QuarantineConfig& config,
                              const std::optional<CheckResult>& found) {
  if (!config.certify_return || HealthAt(e, now, config) != NodeHealth::kChecking) return {};
  if (!CheckInFlight(e)) return {CertifyAction::kSubmit, ""};
  if (found)
    return {found->exit_code == 0 ? CertifyAction::kPass : CertifyAction::kFail,
            CheckSummary(*found)};
  if (now >= e.last_check->started + config.certify_timeout)
    return {CertifyAction::kTimedOut,
            "no result within " + std::to_string(config.certify_timeout.count()) +
                " s (certify-timeout-s): cancelled"};
  return {};
}

std::string CheckScript(const std::string& node, const std::string& command,
                        const std::string& result_path) {
  const std::string out = ShellQuote(result_path + ".out");
  const std::string tmp = ShellQuote(result_path + ".tmp");
  return "#!/bin/bash\n"
         "# trellis-controller's certification check of " + node +
         " (docs/architecture.md, \"Quarantine\"):\n"
         "# the controller reads the result file, so no accounting is needed.\n"
         "( " + command + " ) >" + out + " 2>&1 </dev/null\n"
         "rc=$?\n"
         "{ echo \"$rc\"; tail -n 40 " + out + "; } >" + tmp + " && mv -f " + tmp + " " +
         ShellQuote(result_path) + "\n"
         "rm -f " + out + "\n"
         "exit \"$rc\"\n";
}

NodeCheck EndCheck(const NodeCheck& check, bool passed, std::string summary, WallTime now) {
  NodeCheck c = check;
  c.ended = now;
  c.passed = passed;
  c.summary = std::move(summary);
  return c;
}

}  // namespace trellis::controller
