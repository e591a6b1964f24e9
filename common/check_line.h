#pragma once
// One line of `trellis doctor` and `trellis-controller --check`
// (docs/architecture.md, "Doctor"): a check's name, its verdict, and what was
// found or what is wrong and what to do. The worker's `check` subcommand on a
// compute node prints its lines as JSON, one a line, for the controller to
// read back; the CLI prints them as text.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trellis {

struct CheckLine {
  enum class Verdict { kOk, kWarn, kFail, kSkip };
  std::string name;  // "munge", "partition", "node node3: numa", ...
  Verdict verdict = Verdict::kOk;
  std::string detail;  // what was found; for a failure, what is wrong and what to do
};

// "ok", "warn", "FAIL", "skip".
const char* VerdictWord(CheckLine::Verdict v);
// "ok    munge: ..." with the verdict padded to one width.
std::string FormatCheckLine(const CheckLine& line);
// {"check": "...", "verdict": "ok", "detail": "..."} on one line.
std::string CheckLineJson(const CheckLine& line);
// The JSON line back; errors name what is missing.
absl::StatusOr<CheckLine> ParseCheckLineJson(const std::string& text);
bool AnyFailed(const std::vector<CheckLine>& lines);

}  // namespace trellis
