#pragma once
// The long spans of a profile, host and device, in time order: which host
// thread stood in which call (an ATen op, a CUDA runtime call) while the
// device copied what. The kernel table and the idle timeline (timeline.h) say
// how long the device worked and waited; this says what the host was blocked
// in meanwhile, e.g. a step's read to the host standing behind another
// stream's large copy. Pure: it gets the spans, so it is tested without a
// device.

#include <cstdint>
#include <string>
#include <vector>

#include "trainer_core/profile/timeline.h"

namespace trellis::train {

struct HostSpan {
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t thread = 0;  // the system's id; numbered 1, 2, ... by first appearance
  std::string name;
};

// Host spans and device copies (names starting "Memcpy" or "Memset") of at
// least `min_ns`, by start, from the earliest span of either list, at most
// `limit` lines (the longest kept where there are more). Spans with end before
// start are refused (std::invalid_argument naming the span).
std::string FormatLongSpans(const std::vector<HostSpan>& host,
                            const std::vector<DeviceSpan>& device, uint64_t min_ns, size_t limit);

}  // namespace trellis::train
