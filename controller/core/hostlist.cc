#include "controller/core/hostlist.h"

#include <charconv>
#include <cstdint>

namespace trellis::controller {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    std::string_view part = s.substr(start, end == std::string_view::npos ? end : end - start);
    parts.push_back(part);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size() && !s.empty();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  constexpr uint64_t kMaxNames = 100000;
  const auto too_many = [] {
    return absl::InvalidArgumentError("hostlist expands to more than 100000 names");
  };
  std::vector<std::string> names;
  size_t i = 0;
  while (i < hostlist.size()) {
    size_t open = hostlist.find_first_of("[,", i);
    if (open == std::string_view::npos || hostlist[open] == ',') {
      size_t end = open == std::string_view::npos ? hostlist.size() : open;
      if (end > i && names.size() >= kMaxNames) return too_many();
      if (end > i) names.emplace_back(hostlist.substr(i, end - i));
      i = end + 1;
      continue;
    }
    std::string prefix(hostlist.substr(i, open - i));
    size_t close = hostlist.find(']', open);
    if (close == std::string_view::npos)
      return absl::InvalidArgumentError("hostlist '" + std::string(hostlist) + "': unclosed '['");
    std::string suffix;
    size_t after = close + 1;
    while (after < hostlist.size() && hostlist[after] != ',') suffix += hostlist[after++];
    for (std::string_view range :
         Split(hostlist.substr(open + 1, close - open - 1), ',')) {
      std::vector<std::string_view> ends = Split(range, '-');
      uint64_t lo, hi;
      if (ends.empty() || ends.size() > 2 || !ParseNumber(ends[0], &lo) ||
          !ParseNumber(ends.back(), &hi) || hi < lo)
        return absl::InvalidArgumentError("hostlist '" + std::string(hostlist) +
                                          "': bad range '" + std::string(range) + "'");
      // hi - lo + 1 names. Counted from lo: `n <= hi` never ends when hi is the
      // largest uint64_t, and names.size() + (hi - lo) can wrap.
      if (hi - lo >= kMaxNames - names.size()) return too_many();
      size_t width = ends[0].size();
      for (uint64_t k = 0; k <= hi - lo; ++k) {
        std::string num = std::to_string(lo + k);
        if (num.size() < width) num = std::string(width - num.size(), '0') + num;
        names.push_back(prefix + num + suffix);
      }
    }
    i = after + 1;
  }
  return names;
}

}  // namespace trellis::controller
