#include "controller/app/notifier.h"

#include <boost/asio/post.hpp>

#include "common/log.h"
#include "common/subprocess.h"

namespace trellis::controller {

namespace {

void Report(const std::string& what, const absl::StatusOr<CommandResult>& r) {
  if (!r.ok())
    spdlog::warn("notification: {}: {}", what, std::string(r.status().message()));
  else if (r->timed_out)
    spdlog::warn("notification: {}: timed out", what);
  else if (r->exit_code != 0)
    spdlog::warn("notification: {}: exit {}: {}", what, r->exit_code, r->err.substr(0, 512));
}

}  // namespace

void Notifier::Send(const spec::NotifySection& to, Notification n) {
  if (!Wants(to, n.event)) return;
  boost::asio::post(pool_, [to, n = std::move(n)] {
    const std::string json = NotificationJson(n);
    const std::string what = n.event + (n.run_id.empty() ? " of node " + n.node : " of run " + n.run_id);
    if (!to.webhook.empty()) {
      CommandOptions o;
      o.timeout = std::chrono::seconds(60);  // curl's own tries and waits bound it first
      Report("webhook " + to.webhook + " (" + what + ")", RunCommand(WebhookArgv(to.webhook, json), o));
    }
    if (!to.command.empty()) {
      CommandOptions o;
      o.timeout = std::chrono::seconds(30);
      o.extra_env = {{"TRELLIS_EVENT", n.event},   {"TRELLIS_RUN_ID", n.run_id},
                     {"TRELLIS_STATE", n.state},   {"TRELLIS_REASON", n.reason},
                     {"TRELLIS_NODE", n.node},     {"TRELLIS_NOTIFICATION", json}};
      Report("command (" + what + ")", RunCommand({"/bin/sh", "-c", to.command}, o));
    }
    spdlog::info("notification: {} sent", what);
  });
}

}  // namespace trellis::controller
