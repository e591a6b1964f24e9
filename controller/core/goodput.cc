#include "controller/core/goodput.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace trellis::controller {

namespace {

using Span = Goodput::Span;

// A launch's figures on the timeline.
struct LaunchTimes {
  std::optional<WallTime> kept;  // its newest kept step's time; none kept: nullopt
  WallTime last;                 // its last step's time
  Span last_step_time{0};
};

std::vector<LaunchTimes> TimesOf(const std::vector<LaunchSteps>& launches) {
  std::vector<LaunchTimes> out(launches.size());
  // Walking back, `redo_from` is the lowest first step of the later launches:
  // every step from it on ran again.
  int64_t redo_from = std::numeric_limits<int64_t>::max();
  for (size_t i = launches.size(); i-- > 0;) {
    const std::vector<StepMark>& marks = launches[i].marks;
    LaunchTimes& t = out[i];
    t.last = marks.back().time;
    t.last_step_time = std::max(launches[i].last_step_time, Span(0));
    for (const StepMark& m : marks)
      if (m.step < redo_from) t.kept = m.time;
    redo_from = std::min(redo_from, marks.front().step);
  }
  return out;
}

}  // namespace

double Goodput::ratio() const {
  Span all = total();
  if (all <= Span(0)) return 0;
  return std::chrono::duration<double>(running) / std::chrono::duration<double>(all);
}

Goodput ComputeGoodput(const std::vector<StateChange>& changes,
                       const std::vector<LaunchSteps>& launches, WallTime now) {
  Goodput g;
  const std::vector<LaunchTimes> times = TimesOf(launches);
  // Each launch in the RUNNING span its first step falls in: the last that
  // began at or before it (the first span when none did).
  std::vector<std::vector<size_t>> in_span(changes.size());
  std::optional<size_t> first_running;
  for (size_t k = 0; k < changes.size(); ++k)
    if (changes[k].to == RunState::kRunning && !first_running) first_running = k;
  for (size_t i = 0; i < launches.size() && first_running; ++i) {
    size_t span = *first_running;
    for (size_t k = 0; k < changes.size(); ++k)
      if (changes[k].to == RunState::kRunning && changes[k].time <= launches[i].marks.front().time)
        span = k;
    in_span[span].push_back(i);
  }

  bool handing_over = false;  // since a handoff's RESTARTING, until RUNNING
  for (size_t k = 0; k < changes.size(); ++k) {
    const RunState state = changes[k].to;
    const bool last = k + 1 == changes.size();
    const WallTime start = changes[k].time;
    // A clock that stepped back makes an empty span, not a negative one.
    const WallTime end =
        std::max(start, last ? (IsTerminal(state) ? start : now) : changes[k + 1].time);
    if (state == RunState::kRestarting) handing_over = changes[k].handoff;
    if (state == RunState::kRunning || IsTerminal(state)) handing_over = false;
    if (handing_over) {
      g.handoff += end - start;
      continue;
    }
    switch (state) {
      case RunState::kQueued:
      case RunState::kSubmitted:
        g.queued += end - start;
        break;
      case RunState::kGating:
        g.gating += end - start;
        break;
      case RunState::kRestarting:
        g.restarting += end - start;
        break;
      case RunState::kRunning: {
        if (launches.empty()) {  // no step records: nothing tells kept from lost
          g.running += end - start;
          break;
        }
        const bool stops = !last && changes[k + 1].to == RunState::kRestarting;
        const bool handoff = stops && changes[k + 1].handoff;
        const bool failed = stops && !handoff;
        WallTime at = start;  // accounted up to here
        for (size_t i : in_span[k]) {
          const LaunchTimes& t = times[i];
          WallTime kept = std::clamp(t.kept.value_or(at), at, end);
          WallTime lost = std::clamp(t.last, kept, end);
          if (failed) lost = std::min(end, lost + t.last_step_time);
          g.running += kept - at;
          g.redone += lost - kept;
          at = lost;
        }
        (failed ? g.restarting : handoff ? g.handoff : g.running) += end - at;
        break;
      }
      case RunState::kSucceeded:
      case RunState::kFailed:
      case RunState::kCancelled:
        break;
    }
  }
  return g;
}

}  // namespace trellis::controller
