#pragma once
// Where the device sits idle during profiled steps: the union of the kernel
// (and copy) spans of all streams against the time from the first span's start
// to the last one's end, and the idle gaps grouped by the spans around them.
// Kernel time summed by name (kernel_profile.h) cannot tell a step that waits on
// the host or on a stream from one that computes; this can. Pure: it gets the
// spans, so it is tested without a device.

#include <cstdint>
#include <string>
#include <vector>

namespace trellis::train {

struct DeviceSpan {
  uint64_t start_ns = 0, end_ns = 0;
  int64_t stream = 0;
  std::string name;
};

// Idle gaps between the same two neighbouring spans (by name), summed.
struct IdleGaps {
  std::string before, after;  // the span that ended last before the gap, the one after it
  uint64_t idle_ns = 0;
  int64_t count = 0;
};

// Memsets grouped by the span that follows them on their own stream: a memset
// names no caller, but the kernel it zeroes memory for comes next in line.
struct MemsetsBefore {
  std::string next;  // the first span after the memsets that is not one
  uint64_t memset_ns = 0;
  int64_t count = 0;
};

struct Timeline {
  uint64_t span_ns = 0;     // first start to last end
  uint64_t busy_ns = 0;     // some span running on some stream
  int64_t main_stream = 0;  // the stream with the most busy time
  uint64_t main_stream_busy_ns = 0;
  uint64_t small_gaps_ns = 0;  // idle in gaps under the threshold (launch latency)
  int64_t small_gaps = 0;
  std::vector<IdleGaps> gaps;  // gaps at or over the threshold, the most idle first
  std::vector<MemsetsBefore> memsets;  // the most memsets first
};

// Spans with end before start are refused (std::invalid_argument naming the
// span); spans of zero length count as neither busy nor a gap boundary.
Timeline AnalyzeTimeline(std::vector<DeviceSpan> spans, uint64_t min_gap_ns);

// A few lines of text, per step (the spans cover `steps` steps), with the
// `top` largest groups of gaps and of memsets.
std::string FormatTimeline(const Timeline& t, int64_t steps, size_t top);

}  // namespace trellis::train
