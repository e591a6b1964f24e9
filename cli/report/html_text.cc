#include "cli/report/html_text.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "cli/format.h"

namespace trellis::cli::report {

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

namespace {
std::string Printf(const char* fmt, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// "%.3g" without a trailing exponent for plain magnitudes: 0.25, 1.5, 12.
std::string Plain(double v) { return Printf("%.3g", v); }
}  // namespace

std::string Compact(double value) {
  if (!std::isfinite(value)) return "-";
  double a = std::fabs(value);
  if (a == 0) return "0";
  if (a < 0.01) return Printf("%.2g", value);
  // 999,999 is "1M", not "1e+03k": a unit is used while its three digits hold.
  const std::pair<double, const char*> units[] = {{1, ""}, {1e3, "k"}, {1e6, "M"}, {1e9, "G"}};
  for (const auto& [unit, suffix] : units)
    if (a / unit < 999.5) return Plain(value / unit) + suffix;
  return Printf("%.2g", value);
}

std::string Grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -static_cast<uint64_t>(n) : static_cast<uint64_t>(n));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Seconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 0) seconds = 0;
  if (seconds < 1) return Printf("%.0fms", seconds * 1000);
  if (seconds < 60) return Printf("%.2fs", seconds);
  return FormatDuration(std::chrono::milliseconds(std::llround(seconds * 1000)));
}

}  // namespace trellis::cli::report
