#include "trainer_core/profile/timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>

namespace trellis::train {

namespace {
uint64_t StreamUnion(std::vector<const DeviceSpan*> spans) {
  uint64_t busy = 0, end = 0;
  for (const DeviceSpan* s : spans) {
    if (s->start_ns >= end) {
      busy += s->end_ns - s->start_ns;
    } else if (s->end_ns > end) {
      busy += s->end_ns - end;
    }
    end = std::max(end, s->end_ns);
  }
  return busy;
}

std::string ShortKernelName(const std::string& name) {
  std::string s = name.rfind("void ", 0) == 0 ? name.substr(5) : name;
  return s.size() > 70 ? s.substr(0, 67) + "..." : s;
}

bool IsMemset(const DeviceSpan& s) { return s.name.rfind("Memset", 0) == 0; }

// `list` is one stream's spans in start order. A run of memsets counts toward
// the span that ends the run; memsets at the stream's end toward "(none)".
void GroupMemsets(const std::vector<const DeviceSpan*>& list,
                  std::map<std::string, MemsetsBefore>& groups) {
  uint64_t run_ns = 0;
  int64_t run = 0;
  auto close = [&](const std::string& next) {
    if (run == 0) return;
    MemsetsBefore& g = groups[next];
    g.next = next;
    g.memset_ns += run_ns;
    g.count += run;
    run_ns = 0;
    run = 0;
  };
  for (const DeviceSpan* s : list) {
    if (IsMemset(*s)) {
      run_ns += s->end_ns - s->start_ns;
      ++run;
    } else {
      close(ShortKernelName(s->name));
    }
  }
  close("(none)");
}
}  // namespace

Timeline AnalyzeTimeline(std::vector<DeviceSpan> spans, uint64_t min_gap_ns) {
  for (const DeviceSpan& s : spans)
    if (s.end_ns < s.start_ns)
      throw std::invalid_argument("timeline: span '" + s.name + "' ends (" +
                                  std::to_string(s.end_ns) + " ns) before it starts (" +
                                  std::to_string(s.start_ns) + " ns)");
  spans.erase(std::remove_if(spans.begin(), spans.end(),
                             [](const DeviceSpan& s) { return s.end_ns == s.start_ns; }),
              spans.end());
  Timeline t;
  if (spans.empty()) return t;
  std::sort(spans.begin(), spans.end(), [](const DeviceSpan& a, const DeviceSpan& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns < b.end_ns;
  });

  std::map<std::pair<std::string, std::string>, IdleGaps> groups;
  const DeviceSpan* last = &spans.front();  // the span reaching furthest so far
  uint64_t begin = last->start_ns, end = last->end_ns, idle = 0;
  for (size_t i = 1; i < spans.size(); ++i) {
    const DeviceSpan& s = spans[i];
    if (s.start_ns > end) {
      const uint64_t gap = s.start_ns - end;
      idle += gap;
      if (gap < min_gap_ns) {
        t.small_gaps_ns += gap;
        ++t.small_gaps;
      } else {
        IdleGaps& g = groups[{ShortKernelName(last->name), ShortKernelName(s.name)}];
        g.before = ShortKernelName(last->name);
        g.after = ShortKernelName(s.name);
        g.idle_ns += gap;
        ++g.count;
      }
    }
    if (s.end_ns > end) {
      end = s.end_ns;
      last = &s;
    }
  }
  t.span_ns = end - begin;
  t.busy_ns = t.span_ns - idle;  // the gaps are exactly where no span runs

  std::map<int64_t, std::vector<const DeviceSpan*>> by_stream;
  for (const DeviceSpan& s : spans) by_stream[s.stream].push_back(&s);
  std::map<std::string, MemsetsBefore> memsets;
  for (const auto& [stream, list] : by_stream) {
    GroupMemsets(list, memsets);
    const uint64_t busy = StreamUnion(list);
    if (busy > t.main_stream_busy_ns) {
      t.main_stream_busy_ns = busy;
      t.main_stream = stream;
    }
  }
  for (auto& [key, g] : groups) t.gaps.push_back(std::move(g));
  std::sort(t.gaps.begin(), t.gaps.end(),
            [](const IdleGaps& a, const IdleGaps& b) { return a.idle_ns > b.idle_ns; });
  for (auto& [next, g] : memsets) t.memsets.push_back(std::move(g));
  std::stable_sort(t.memsets.begin(), t.memsets.end(),
                   [](const MemsetsBefore& a, const MemsetsBefore& b) { return a.count > b.count; });
  return t;
}

std::string FormatTimeline(const Timeline& t, int64_t steps, size_t top) {
  const double per = 1e6 * static_cast<double>(std::max<int64_t>(steps, 1));  // ns -> ms/step
  const double span = std::max<double>(static_cast<double>(t.span_ns), 1);
  char line[512];
  std::string out;
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  add("device timeline per step (mean of %lld steps): %.1f ms from first kernel to last\n",
      static_cast<long long>(steps), t.span_ns / per);
  const std::string main = "busy (stream " + std::to_string(t.main_stream) + " alone)";
  add("  %-24s%8.1f ms  %5.1f%%\n", "busy (any stream)", t.busy_ns / per, 100 * t.busy_ns / span);
  add("  %-24s%8.1f ms  %5.1f%%\n", main.c_str(), t.main_stream_busy_ns / per,
      100 * t.main_stream_busy_ns / span);
  const uint64_t idle = t.span_ns - t.busy_ns;
  add("  %-24s%8.1f ms  %5.1f%%, of it %.1f ms in %.0f short gaps\n", "idle", idle / per,
      100 * idle / span, t.small_gaps_ns / per, t.small_gaps / (per / 1e6));
  if (!t.gaps.empty()) {
    add("\nidle ms/step  gaps/step  between (kernel before -> kernel after)\n");
    for (size_t i = 0; i < std::min(top, t.gaps.size()); ++i) {
      const IdleGaps& g = t.gaps[i];
      add("%12.2f  %9.1f  %s\n%25s-> %s\n", g.idle_ns / per, g.count / (per / 1e6),
          g.before.c_str(), "", g.after.c_str());
    }
  }
  if (!t.memsets.empty()) {
    add("\nmemsets/step  memset ms/step  the span after them on their stream\n");
    for (size_t i = 0; i < std::min(top, t.memsets.size()); ++i) {
      const MemsetsBefore& m = t.memsets[i];
      add("%12.1f  %14.2f  %s\n", m.count / (per / 1e6), m.memset_ns / per, m.next.c_str());
    }
  }
  return out;
}

}  // namespace trellis::train
