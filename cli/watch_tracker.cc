#include "cli/watch_tracker.h"

#include <algorithm>

#include "cli/format.h"

namespace trellis::cli {

std::string WatchTracker::OnEvent(const v1::WatchRunEvent& event, int64_t now_ms) {
  std::string text;
  switch (event.event_case()) {
    case v1::WatchRunEvent::kSnapshot:
      text = OnSnapshot(event.snapshot(), now_ms);
      break;
    case v1::WatchRunEvent::kTransition:
      text = OnTransition(event.transition(), now_ms);
      break;
    case v1::WatchRunEvent::kStep:
      text = OnStep(event.step());
      break;
    case v1::WatchRunEvent::EVENT_NOT_SET:
      return "";
  }
  // JSON: every event as received, one object per line (a reconnect shows up
  // as a new snapshot); the bookkeeping above still tracks the state.
  return json_ ? WatchEventToJson(event).dump() + "\n" : text;
}

std::string WatchTracker::OnSnapshot(const v1::Run& run, int64_t now_ms) {
  TextOptions opt{now_ms, utc_};
  bool first = snapshots_++ == 0;
  state_ = run.summary().state();
  std::string out;
  if (first) {
    total_steps_ = TotalSteps(run.spec_toml());
    out += RenderWatchHeader(run, opt);
    for (const auto& e : run.events()) {
      events_seen_.insert({e.unix_ms(), e.from(), e.to()});
    }
    for (const auto& s : run.recent_steps()) columns_ |= ColumnsOf(s);
    out += RenderStepHeader(total_steps_, columns_);
  } else {
    out += "(reconnected; run is " + StateName(state_) + ")\n";
    for (const auto& e : run.events()) out += OnTransition(e, now_ms);
    state_ = run.summary().state();
  }
  // recent_steps come newest first; print oldest first.
  std::vector<const v1::StepSummary*> steps;
  for (const auto& s : run.recent_steps()) steps.push_back(&s);
  std::sort(steps.begin(), steps.end(), [](const v1::StepSummary* a, const v1::StepSummary* b) {
    return StepKey{a->attempt(), a->launch(), a->step()} <
           StepKey{b->attempt(), b->launch(), b->step()};
  });
  for (const auto* s : steps) out += OnStep(*s);
  return out;
}

std::string WatchTracker::OnTransition(const v1::RunEvent& event, int64_t now_ms) {
  if (!events_seen_.insert({event.unix_ms(), event.from(), event.to()}).second) return "";
  state_ = event.to();
  return RenderTransition(event, TextOptions{now_ms, utc_});
}

std::string WatchTracker::OnStep(const v1::StepSummary& step) {
  StepKey key{step.attempt(), step.launch(), step.step()};
  if (last_step_ && key <= *last_step_) return "";
  last_step_ = key;
  std::string out;
  const StepColumns has = ColumnsOf(step);
  if (!columns_.Covers(has)) {
    columns_ |= has;
    out += RenderStepHeader(total_steps_, columns_);
  }
  return out + RenderStepRow(step, total_steps_, columns_);
}

std::chrono::milliseconds ReconnectDelay(int attempt) {
  constexpr std::chrono::milliseconds kFirst{250};
  constexpr std::chrono::milliseconds kMax{5000};
  if (attempt >= 5) return kMax;
  return std::min(kFirst * (1 << std::max(attempt, 0)), kMax);
}

}  // namespace trellis::cli
