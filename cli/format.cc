#include "cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace trellis::cli {

namespace {

constexpr std::string_view kStatePrefix = "RUN_STATE_";

// Code points, so that names and reasons in UTF-8 line up and are not cut
// inside a character.
size_t Width(std::string_view s) {
  return std::count_if(s.begin(), s.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// Byte offset of the `n`-th code point (or s.size()).
size_t OffsetOf(std::string_view s, size_t n) {
  size_t seen = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (seen++ == n) return i;
  }
  return s.size();
}

std::string Printf(const char* fmt, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, a, b);
  return buf;
}

}  // namespace

std::string StateName(v1::RunState state) {
  if (!v1::RunState_IsValid(state)) return "STATE_" + std::to_string(static_cast<int>(state));
  std::string name = v1::RunState_Name(state);
  if (name.rfind(kStatePrefix, 0) == 0) name.erase(0, kStatePrefix.size());
  return name;
}

bool IsTerminal(v1::RunState state) {
  return state == v1::RUN_STATE_SUCCEEDED || state == v1::RUN_STATE_FAILED ||
         state == v1::RUN_STATE_CANCELLED;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = std::max<int64_t>(d.count(), 0);
  if (ms < 1000) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof(buf), "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

std::string FormatAge(int64_t now_ms, int64_t then_ms) {
  if (then_ms == 0) return "-";
  int64_t s = std::max<int64_t>(now_ms - then_ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string FormatTime(int64_t unix_ms, bool utc) {
  if (unix_ms == 0) return "-";
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  if (utc) {
    gmtime_r(&t, &tm);
  } else {
    localtime_r(&t, &tm);
  }
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string Truncate(std::string_view s, size_t width) {
  if (Width(s) <= width) return std::string(s);
  if (width <= 3) return std::string(s.substr(0, OffsetOf(s, width)));
  return std::string(s.substr(0, OffsetOf(s, width - 3))) + "...";
}

std::string FormatShape(int nodes, int ranks_per_node) {
  return std::to_string(nodes) + "x" + std::to_string(ranks_per_node);
}

std::string FormatLoss(double loss) {
  if (std::isnan(loss)) return "-";
  return Printf("%.4f", loss);
}

std::string FormatRate(int64_t tokens, double seconds) {
  if (!(seconds > 0)) return "-";
  double rate = static_cast<double>(tokens) / seconds;
  if (rate < 1e3) return Printf("%.0f", rate);
  if (rate < 1e6) return Printf("%.1fk", rate / 1e3);
  if (rate < 1e9) return Printf("%.2fM", rate / 1e6);
  return Printf("%.2fG", rate / 1e9);
}

std::string FormatSeconds(double seconds) { return Printf("%.2f", seconds); }

std::string FormatGiB(int64_t bytes) {
  return Printf("%.2f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

std::string FormatRatio(double ratio) { return Printf("%.2fx", ratio); }

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

Table::Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void Table::AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string Table::Render() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (row.size() > widths.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - Width(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string RetryRefusalHint(const std::string& run, const std::string& refusal) {
  // ResolveInitFrom's words for "RUN@latest" with no complete step (a named
  // step is refused with the steps there, which says enough).
  const std::string none = "training.init_from: run " + run + " has no complete checkpoint (";
  if (refusal.find(none) == std::string::npos) return "";
  return run + " has no checkpoint to resume from; `trellis retry " + run +
         " --fresh` starts it again from step 0";
}

std::optional<int64_t> ParseSince(const std::string& text, int64_t now_ms, std::string* error) {
  *error = "--since \"" + text + "\" is not a duration (90s, 10m, 2h, 1d) or a time "
           "(2026-12-07T16:05:00Z in UTC, 2026-12-07 16:05 in local time)";
  char* end = nullptr;
  const double amount = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && amount >= 0 && end[0] != '\0' && end[1] == '\0') {
    const std::pair<char, double> kUnits[] = {{'s', 1e3}, {'m', 6e4}, {'h', 3.6e6}, {'d', 8.64e7}};
    for (const auto& [unit, ms] : kUnits)
      if (end[0] == unit) return now_ms - static_cast<int64_t>(amount * ms);
    return std::nullopt;
  }
  std::tm tm{};
  const char* formats[] = {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M",
                           "%Y-%m-%d %H:%M"};
  for (const char* format : formats) {
    tm = std::tm{};
    const char* rest = strptime(text.c_str(), format, &tm);
    if (rest == nullptr || (rest[0] != '\0' && std::string(rest) != "Z")) continue;
    tm.tm_isdst = -1;
    const std::time_t t = rest[0] == 'Z' ? timegm(&tm) : std::mktime(&tm);
    if (t == -1) continue;
    return static_cast<int64_t>(t) * 1000;
  }
  return std::nullopt;
}

}  // namespace trellis::cli
