#include "trainer_core/parallel/comm_clock.h"

#include <chrono>

namespace trellis::train {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

void CommClock::Span::MarkDoneOnHost() {
  int64_t unset = -1;
  done_ns.compare_exchange_strong(unset, NowNs());
}

CommClock::CommClock(bool cuda) : cuda_(cuda) { Reset(); }

int CommClock::AddGroup() {
  streams_.push_back(std::make_unique<compat::SideStream>(cuda_));
  return static_cast<int>(streams_.size()) - 1;
}

std::shared_ptr<CommClock::Span> CommClock::Issue(int group) {
  auto span = std::make_shared<Span>();
  span->group = group;
  span->issued = compat::DeviceStamp::Now(cuda_);
  spans_.push_back(span);
  return span;
}

void CommClock::Reset() {
  spans_.clear();
  origin_ = compat::DeviceStamp::Now(cuda_);
}

CommTimes CommClock::Take() {
  std::vector<CollectiveSpan> spans;
  for (const auto& s : spans_) {
    CollectiveSpan c;
    c.group = s->group;
    c.issued = s->issued.SecondsSince(origin_);
    compat::DeviceStamp done = s->done;
    if (!cuda_) {
      const int64_t ns = s->done_ns.load();
      // Not completed yet (never waited): not counted.
      if (ns < 0) continue;
      const auto since_epoch = std::chrono::duration_cast<Clock::duration>(
          std::chrono::nanoseconds(ns));
      done = compat::DeviceStamp::At(Clock::time_point(since_epoch));
    }
    if (!done.stamped()) continue;
    c.done = done.SecondsSince(origin_);
    if (s->waited.stamped()) c.waited = s->waited.SecondsSince(origin_);
    spans.push_back(c);
  }
  return SumCollectives(spans);
}

}  // namespace trellis::train
