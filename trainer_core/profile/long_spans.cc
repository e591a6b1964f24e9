#include "trainer_core/profile/long_spans.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <tuple>

namespace trellis::train {
namespace {

struct Line {
  uint64_t start_ns, end_ns;
  std::string where, what;
};

bool IsCopy(const std::string& name) {
  return name.rfind("Memcpy", 0) == 0 || name.rfind("Memset", 0) == 0;
}

void Check(uint64_t start, uint64_t end, const std::string& name) {
  if (end < start)
    throw std::invalid_argument("span '" + name + "' ends (" + std::to_string(end) +
                                " ns) before it starts (" + std::to_string(start) + " ns)");
}

std::string ShortSpanName(const std::string& name) {
  return name.size() > 80 ? name.substr(0, 77) + "..." : name;
}

}  // namespace

std::string FormatLongSpans(const std::vector<HostSpan>& host,
                            const std::vector<DeviceSpan>& device, uint64_t min_ns, size_t limit) {
  uint64_t origin = UINT64_MAX;
  for (const HostSpan& h : host) {
    Check(h.start_ns, h.end_ns, h.name);
    origin = std::min(origin, h.start_ns);
  }
  for (const DeviceSpan& d : device) {
    Check(d.start_ns, d.end_ns, d.name);
    origin = std::min(origin, d.start_ns);
  }
  // Threads numbered by their first span, so the main thread (which starts
  // the profile) is usually 1.
  std::vector<const HostSpan*> by_start;
  for (const HostSpan& h : host) by_start.push_back(&h);
  std::stable_sort(by_start.begin(), by_start.end(),
                   [](const HostSpan* a, const HostSpan* b) { return a->start_ns < b->start_ns; });
  std::map<uint64_t, int> thread_no;
  for (const HostSpan* h : by_start)
    thread_no.emplace(h->thread, static_cast<int>(thread_no.size()) + 1);

  std::vector<Line> lines;
  for (const HostSpan& h : host)
    if (h.end_ns - h.start_ns >= min_ns)
      lines.push_back({h.start_ns, h.end_ns, "host thread " + std::to_string(thread_no[h.thread]),
                       ShortSpanName(h.name)});
  for (const DeviceSpan& d : device)
    if (IsCopy(d.name) && d.end_ns - d.start_ns >= min_ns)
      lines.push_back(
          {d.start_ns, d.end_ns, "device stream " + std::to_string(d.stream), ShortSpanName(d.name)});
  if (lines.size() > limit) {
    std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
      return a.end_ns - a.start_ns > b.end_ns - b.start_ns;
    });
    lines.resize(limit);
  }
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);  // outer call first
  });

  char buf[512];
  std::snprintf(buf, sizeof buf,
                "spans of %.1f ms or more (host calls; device copies), ms from the profile's "
                "first span\n%9s %9s  %-18s %s\n",
                min_ns / 1e6, "start", "ms", "where", "what");
  std::string out = buf;
  for (const Line& l : lines) {
    std::snprintf(buf, sizeof buf, "%9.2f %9.2f  %-18s %s\n", (l.start_ns - origin) / 1e6,
                  (l.end_ns - l.start_ns) / 1e6, l.where.c_str(), l.what.c_str());
    out += buf;
  }
  if (lines.empty()) out += "(none)\n";
  return out;
}

}  // namespace trellis::train
