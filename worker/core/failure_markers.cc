#include "worker/core/failure_markers.h"

#include <array>
#include <cctype>
#include <vector>

#include "common/failure_marker_names.h"

namespace trellis::worker {
namespace {

struct Pattern {
  std::string_view text;
  bool whole_word = false;  // not part of a longer identifier (MemoryError, Xid)
};

struct Marker {
  std::string_view name;
  std::vector<Pattern> patterns;
};

// The order of this table is the order of LogEvidence::markers, and its
// names are kFailureMarkerNames (failure_markers_test checks both).
constexpr size_t kMarkerCount = kFailureMarkerNames.size();

const std::array<Marker, kMarkerCount>& Markers() {
  static const std::array<Marker, kMarkerCount> kMarkers = {{
      {"device_oom",
       {{"CUDA out of memory"},
        {"CUDA error: out of memory"},
        {"OutOfMemoryError"},
        {"cudaErrorMemoryAllocation"},
        {"CUBLAS_STATUS_ALLOC_FAILED"}}},
      {"host_oom", {{"std::bad_alloc"}, {"MemoryError", true}, {"Cannot allocate memory"}}},
      {"nccl_error",
       {{"NCCL error"},
        {"ncclSystemError"},
        {"ncclInternalError"},
        {"ncclRemoteError"},
        {"ncclUnhandledCudaError"}}},
      {"nccl_timeout",
       {{"Watchdog caught collective operation timeout"}, {"collective operation timeout"}}},
      {"device_error",
       {{"uncorrectable ECC"},
        {"cudaErrorECCUncorrectable"},
        {"GPU has fallen off the bus"},
        {"Xid", true}}},
      {"network",
       {{"Connection reset by peer"},
        {"No route to host"},
        {"Connection refused"},
        {"Network is unreachable"}}},
      {"damaged_checkpoint", {{"damaged checkpoint step "}}},
  }};
  return kMarkers;
}

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool Matches(std::string_view line, const Pattern& p) {
  for (size_t at = line.find(p.text); at != std::string_view::npos;
       at = line.find(p.text, at + 1)) {
    if (!p.whole_word) return true;
    size_t end = at + p.text.size();
    if ((at == 0 || !IsWordChar(line[at - 1])) && (end == line.size() || !IsWordChar(line[end])))
      return true;
  }
  return false;
}

// Length of the valid UTF-8 sequence at s[i], 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

// Printable, valid UTF-8: ANSI escape sequences (colour) and control
// characters (C0, DEL, C1) dropped, tabs made spaces, invalid bytes made '?'.
std::string Sanitize(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == 0x1B) {  // ESC [ parameters intermediates final
      ++i;
      if (i < raw.size() && raw[i] == '[') {
        ++i;
        while (i < raw.size() && raw[i] >= 0x20 && raw[i] <= 0x3F) ++i;
        if (i < raw.size() && raw[i] >= 0x40 && raw[i] <= 0x7E) ++i;
      }
      continue;
    }
    if (c == '\t') {
      out += ' ';
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7F) {
      ++i;
      continue;
    }
    size_t n = Utf8Length(raw, i);
    if (n == 0) {
      out += '?';
      ++i;
      continue;
    }
    bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(raw[i + 1]) < 0xA0;
    if (!c1) out.append(raw.substr(i, n));
    i += n;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// At most `max` bytes, not cutting a UTF-8 sequence.
std::string Truncate(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end));
}

}  // namespace

LogEvidence ScanLogTail(std::string_view tail) {
  const auto& markers = Markers();
  std::array<bool, kMarkerCount> found{};
  std::string last_match, last_nonempty;
  size_t start = 0;
  while (start < tail.size()) {
    size_t end = tail.find_first_of("\r\n", start);
    if (end == std::string_view::npos) end = tail.size();
    std::string line = Sanitize(tail.substr(start, end - start));
    start = end + 1;
    std::string_view trimmed = Trim(line);
    if (trimmed.empty()) continue;
    last_nonempty = std::string(trimmed);
    bool matched = false;
    for (size_t m = 0; m < markers.size(); ++m) {
      for (const Pattern& p : markers[m].patterns) {
        if (Matches(trimmed, p)) {
          found[m] = true;
          matched = true;
          break;
        }
      }
    }
    if (matched) last_match = last_nonempty;
  }
  LogEvidence out;
  for (size_t m = 0; m < markers.size(); ++m)
    if (found[m]) out.markers.emplace_back(markers[m].name);
  out.line = Truncate(last_match.empty() ? last_nonempty : last_match, kMaxEvidenceBytes);
  return out;
}

}  // namespace trellis::worker
