#include "common/check_line.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace trellis {

using Json = nlohmann::json;

const char* VerdictWord(CheckLine::Verdict v) {
  switch (v) {
    case CheckLine::Verdict::kOk: return "ok";
    case CheckLine::Verdict::kWarn: return "warn";
    case CheckLine::Verdict::kFail: return "FAIL";
    case CheckLine::Verdict::kSkip: return "skip";
  }
  return "?";
}

std::string FormatCheckLine(const CheckLine& line) {
  std::string word = VerdictWord(line.verdict);
  word.resize(6, ' ');
  return word + line.name + ": " + line.detail;
}

std::string CheckLineJson(const CheckLine& line) {
  return Json{{"check", line.name}, {"verdict", VerdictWord(line.verdict)},
              {"detail", line.detail}}
      .dump();
}

absl::StatusOr<CheckLine> ParseCheckLineJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("check") || !j["check"].is_string() ||
      !j.contains("verdict") || !j["verdict"].is_string())
    return absl::InvalidArgumentError("not a check line (JSON with \"check\" and \"verdict\")");
  CheckLine line;
  line.name = j["check"].get<std::string>();
  if (j.contains("detail") && j["detail"].is_string()) line.detail = j["detail"].get<std::string>();
  const std::string word = j["verdict"].get<std::string>();
  for (auto v : {CheckLine::Verdict::kOk, CheckLine::Verdict::kWarn, CheckLine::Verdict::kFail,
                 CheckLine::Verdict::kSkip}) {
    if (word == VerdictWord(v)) {
      line.verdict = v;
      return line;
    }
  }
  return absl::InvalidArgumentError("verdict '" + word + "' is not ok, warn, FAIL or skip");
}

bool AnyFailed(const std::vector<CheckLine>& lines) {
  return std::any_of(lines.begin(), lines.end(), [](const CheckLine& l) {
    return l.verdict == CheckLine::Verdict::kFail;
  });
}

}  // namespace trellis
