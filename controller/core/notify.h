#pragma once
// Notifications (docs/architecture.md, "Notifications"): which events a run's
// state change is, what is sent, and how. Pure; controller/app/notifier.h
// sends them off the loop.

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec/run_spec.h"
#include "controller/core/run_state.h"

namespace trellis::controller {

struct Notification {
  std::string event;  // "end", "failure", "restart", "handoff", "quarantine"
  std::string run_id;  // "" for a node's quarantine
  std::string state;   // the run's state after it ("SUCCEEDED"); "" for a node
  std::string reason;
  std::string node;    // a quarantine's node
  int64_t unix_ms = 0;
};

// The events of a stored change of a run from `from` to `to` with `reason`:
// "end" on a terminal state ("failure" too on FAILED), "restart" on
// RESTARTING after a failure, "handoff" on a continuation's takeover.
std::vector<std::string> EventsOf(RunState from, RunState to, const std::string& reason);

// The run's own [notify], or the controller's defaults where it has none.
spec::NotifySection NotifyFor(const spec::NotifySection& run, const spec::NotifySection& defaults);

// Whether `n` wants `event` ("quarantine" goes to the controller's defaults
// only, which want it whenever they are set).
bool Wants(const spec::NotifySection& n, const std::string& event);

// {"event": ..., "run_id": ..., "state": ..., "reason": ..., "node": ..., "unix_ms": ...,
//  "show": "trellis show RUN", "report": "trellis report RUN --html RUN.html"}
std::string NotificationJson(const Notification& n);

// The argument vector that POSTs `json` to `url` (curl: a 10 s timeout, 3
// retries a few seconds apart, a failure status an error).
std::vector<std::string> WebhookArgv(const std::string& url, const std::string& json);

}  // namespace trellis::controller
