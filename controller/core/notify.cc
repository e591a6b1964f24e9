#include "controller/core/notify.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace trellis::controller {

std::vector<std::string> EventsOf(RunState from, RunState to, const std::string& reason) {
  if (from == to) return {};
  if (IsTerminal(to)) {
    if (to == RunState::kFailed) return {"end", "failure"};
    return {"end"};
  }
  // A handoff's new attempt is queued as the time limit's is: its reason says so.
  if (reason.find("handoff") != std::string::npos ||
      reason.find("stopped for the next attempt") != std::string::npos)
    return to == RunState::kRestarting || to == RunState::kQueued
               ? std::vector<std::string>{"handoff"}
               : std::vector<std::string>{};
  // A time limit's continuation is the run going on, not a failure.
  if (to == RunState::kRestarting && from == RunState::kRunning &&
      reason.find("time limit") == std::string::npos)
    return {"restart"};
  return {};
}

spec::NotifySection NotifyFor(const spec::NotifySection& run, const spec::NotifySection& defaults) {
  return run.present() ? run : defaults;
}

bool Wants(const spec::NotifySection& n, const std::string& event) {
  if (!n.present()) return false;
  if (event == "quarantine") return true;
  return std::find(n.on.begin(), n.on.end(), event) != n.on.end();
}

std::string NotificationJson(const Notification& n) {
  nlohmann::ordered_json j{{"event", n.event},   {"run_id", n.run_id}, {"state", n.state},
                           {"reason", n.reason}, {"node", n.node},     {"unix_ms", n.unix_ms}};
  if (!n.run_id.empty()) {
    j["show"] = "trellis show " + n.run_id;
    j["report"] = "trellis report " + n.run_id + " --html " + n.run_id + ".html";
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<std::string> WebhookArgv(const std::string& url, const std::string& json) {
  return {"curl", "--silent", "--show-error", "--fail", "--max-time", "10",
          "--retry", "3", "--retry-delay", "2", "--retry-all-errors",
          "-H", "Content-Type: application/json", "--data-binary", json, "--", url};
}

}  // namespace trellis::controller
