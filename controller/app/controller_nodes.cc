// Nodes: the quarantine list, its use as --exclude, and gate reports.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "common/log.h"
#include "controller/app/controller.h"
#include "controller/core/decisions.h"

namespace trellis::controller {

namespace asio = boost::asio;

void Controller::ApplyStrike(const StrikeNode& s) {
  auto existing = store_->FindQuarantine(s.node);
  if (!existing.ok()) {
    spdlog::error("strike of {} not stored: {}", s.node, std::string(existing.status().message()));
    return;
  }
  QuarantineEntry e = Strike(*existing, s.node, s.reason, s.evidence_json, s.actor,
                             s.until_released, clock_->Now(), config_.quarantine);
  absl::Status st = store_->PutQuarantine(e);
  if (!st.ok())
    return spdlog::error("quarantine of {} not stored: {}", s.node, std::string(st.message()));
  spdlog::warn("node {} quarantined (strike {}{}): {}", s.node, e.strikes,
               e.expiry ? "" : ", until released", s.reason);
  metrics_.NodeStruck(s.node);
  CountQuarantined();
  notifier_.Send(config_.notify_defaults,
                 Notification{"quarantine", "", "", s.reason, s.node,
                              ToUnixMillis(clock_->Now())});
  if (!config_.can_drain) return;
  Enqueue(DrainNode{s.node, s.reason});
}

Effects Controller::CertifyTick() {
  std::map<std::string, std::string> found;
  for (const auto& [node, path] : certifier_.ResultFiles()) {
    std::ifstream in(path);
    if (!in) continue;  // not written yet
    std::ostringstream text;
    text << in.rdbuf();
    found[node] = text.str();
  }
  return certifier_.Tick(found);
}

void Controller::CountQuarantined() { metrics_.SetQuarantinedNodes(ctx_.ExcludedNow().size()); }

void Controller::CountSparePools() {
  auto live = store_->PoolJobs("");
  if (!live.ok()) return;
  int64_t queued = 0, standing = 0, drawn = 0;
  for (const PoolJobRecord& p : *live)
    (p.drawn() ? drawn : p.standing() ? standing : queued) += p.nodes_asked;
  metrics_.SetSparePoolNodes(queued, standing, drawn);
}

void Controller::ListNodes(Reply<std::vector<NodeStatusView>> reply) {
  asio::post(io_, [this, reply = std::move(reply)] {
    auto entries = store_->QuarantineEntries();
    if (!entries.ok()) return reply(entries.status());
    std::vector<NodeStatusView> out;
    for (auto& e : *entries) {
      NodeHealth h = HealthAt(e, clock_->Now(), config_.quarantine);
      out.push_back({std::move(e), h});
    }
    reply(std::move(out));
  });
}

void Controller::QuarantineNode(std::string node, std::string reason, std::string actor,
                                Reply<NodeStatusView> reply) {
  asio::post(io_, [this, node = std::move(node), reason = std::move(reason),
                   actor = std::move(actor), reply = std::move(reply)] {
    if (!IsNodeName(node))
      return reply(absl::InvalidArgumentError("node: must match [A-Za-z0-9._-]{1,255}"));
    if (reason.empty() || reason.size() > 1024)
      return reply(absl::InvalidArgumentError("reason: required, at most 1024 characters"));
    // A name Slurm does not know would be kept out of nothing: asked on the
    // Slurm thread (sinfo), decided back on the loop. Slurm not answering
    // does not stop a quarantine.
    asio::post(slurm_pool_, [this, node, reason, actor, reply] {
      auto nodes = slurm_->ListNodes("");
      asio::post(io_, [this, node, reason, actor, reply, nodes = std::move(nodes)] {
        if (stopped_) return reply(absl::UnavailableError("the controller is stopping"));
        if (nodes.ok() && !nodes->empty() &&
            std::none_of(nodes->begin(), nodes->end(),
                         [&](const SlurmNode& n) { return n.name == node; })) {
          std::vector<std::string> names;
          for (const SlurmNode& n : *nodes) names.push_back(n.name);
          std::sort(names.begin(), names.end(), NaturalLess);
          const size_t shown = std::min<size_t>(names.size(), 8);
          std::string list = absl::StrJoin(names.begin(), names.begin() + shown, ", ");
          if (shown < names.size()) list += ", ... (" + std::to_string(names.size()) + " in all)";
          return reply(absl::InvalidArgumentError("node: '" + node +
                                                  "' is not a node of this cluster (sinfo: " +
                                                  list + ")"));
        }
        if (!nodes.ok())
          spdlog::warn("quarantine of {}: its name not checked, sinfo failed: {}", node,
                       std::string(nodes.status().message()));
        ApplyStrike(StrikeNode{node, reason, "{}", actor, /*until_released=*/true});
        auto e = store_->FindQuarantine(node);
        if (!e.ok() || !e->has_value()) return reply(absl::InternalError("quarantine not stored"));
        reply(NodeStatusView{**e, HealthAt(**e, clock_->Now(), config_.quarantine)});
        Apply(scheduler_.Tick());
      });
    });
  });
}

void Controller::ReleaseNode(std::string node, bool forget, Reply<NodeStatusView> reply) {
  asio::post(io_, [this, node = std::move(node), forget, reply = std::move(reply)] {
    auto e = store_->FindQuarantine(node);
    if (!e.ok()) return reply(e.status());
    if (!e->has_value())
      return reply(absl::NotFoundError("node " + node + " is not in the quarantine list"));
    if (forget) {
      if (absl::Status st = store_->ForgetNode(node); !st.ok()) return reply(st);
      spdlog::info("node {} forgotten ({} strike(s) with it)", node, (*e)->strikes);
      CountQuarantined();
      QuarantineEntry gone;
      gone.node = node;
      reply(NodeStatusView{gone, NodeHealth::kOk});
      Apply(scheduler_.Tick());
      return;
    }
    QuarantineEntry released = Release(**e, clock_->Now(), config_.quarantine);
    absl::Status st = store_->PutQuarantine(released);
    if (!st.ok()) return reply(st);
    spdlog::info("node {} released (on probation, {} strike(s))", node, released.strikes);
    CountQuarantined();
    reply(NodeStatusView{released, HealthAt(released, clock_->Now(), config_.quarantine)});
    Apply(scheduler_.Tick());  // runs waiting for nodes may fit now
  });
}

void Controller::GateReport(std::string run_id, int attempt, Reply<GateReportView> reply) {
  asio::post(io_, [this, run_id = std::move(run_id), attempt, reply = std::move(reply)] {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    auto rows = store_->GateRecords(run_id, attempt);
    if (!rows.ok()) return reply(rows.status());
    GateReportView view{run_id, {}};
    for (const auto& r : *rows) {
      auto nodes = NodeGatesFromJson(r.nodes_json);
      if (!nodes.ok()) return reply(nodes.status());
      view.records.push_back(
          {r.attempt, r.launch, r.time, r.decision, r.reason, r.policy_json, std::move(*nodes)});
    }
    reply(std::move(view));
  });
}

}  // namespace trellis::controller
