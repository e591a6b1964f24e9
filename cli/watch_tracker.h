#pragma once
// What `watch` prints for each event of a WatchRun stream, and what it must
// not print twice when a reconnect replays the run's state. Pure: the shell
// feeds events and prints the returned text.

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "cli/render.h"
#include "trellis/v1/controller.pb.h"

namespace trellis::cli {

class WatchTracker {
 public:
  explicit WatchTracker(bool json, bool utc = false) : json_(json), utc_(utc) {}

  // The text for one event (possibly empty), newline-terminated. A snapshot
  // after the first one is a reconnect: only what was missed is printed.
  std::string OnEvent(const v1::WatchRunEvent& event, int64_t now_ms);

  v1::RunState state() const { return state_; }
  bool has_snapshot() const { return snapshots_ > 0; }

 private:
  using StepKey = std::tuple<int32_t, int32_t, int64_t>;  // attempt, launch, step
  using EventKey = std::tuple<int64_t, int, int>;         // time, from, to

  std::string OnSnapshot(const v1::Run& run, int64_t now_ms);
  std::string OnTransition(const v1::RunEvent& event, int64_t now_ms);
  std::string OnStep(const v1::StepSummary& step);

  bool json_;
  bool utc_;
  int snapshots_ = 0;
  v1::RunState state_ = v1::RUN_STATE_UNSPECIFIED;
  std::set<EventKey> events_seen_;
  std::optional<StepKey> last_step_;
  std::optional<int64_t> total_steps_;
  // The GPU columns of the step table so far: a step that brings a new one
  // prints a new header first (the table's columns only grow).
  StepColumns columns_;
};

// How long to wait before reconnect number `attempt` (0-based): 250 ms,
// doubling, at most 5 s.
std::chrono::milliseconds ReconnectDelay(int attempt);

}  // namespace trellis::cli
