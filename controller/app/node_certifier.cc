#include "controller/app/node_certifier.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "controller/core/batch_script.h"
#include "controller/core/certify.h"

namespace trellis::controller {

namespace {

std::optional<QuarantineEntry> EntryOf(StoreView& store, const std::string& node) {
  auto entries = store.QuarantineEntries();
  if (!entries.ok()) return std::nullopt;
  for (QuarantineEntry& e : *entries)
    if (e.node == node) return std::move(e);
  return std::nullopt;
}

}  // namespace

std::string NodeCertifier::Dir() const { return ctx_.config.output_root + "/certify"; }

std::string NodeCertifier::Base(const std::string& node, WallTime started) const {
  return Dir() + "/" + node + "-" + std::to_string(ToUnixMillis(started));
}

SubmitJob NodeCertifier::CheckJob(const std::string& node, WallTime started) const {
  const CertifyConfig& c = ctx_.config.certify;
  const std::string base = Base(node, started);
  std::string command = c.command.empty()
                            ? ShellQuote(ctx_.config.worker_bin) + " check --certify --touch-gib " +
                                  std::to_string(c.touch_gib)
                            : "/bin/sh -c " + ShellQuote(c.command);
  const auto minutes = std::max<int64_t>(
      1, (ctx_.config.quarantine.certify_timeout.count() + 59) / 60);
  SubmitJob job;
  // Its start time in the name: a restart finds this job, never an older one.
  job.job_name = "trellis-certify-" + node + "-" + std::to_string(ToUnixMillis(started));
  job.args = {"--job-name=" + job.job_name, "--nodelist=" + node, "--nodes=1", "--ntasks=1",
              "--time=" + std::to_string(minutes), "--output=" + base + ".log",
              "--chdir=" + Dir()};
  const std::string partition = c.partition.empty() ? ctx_.config.default_partition : c.partition;
  if (!partition.empty()) job.args.push_back("--partition=" + partition);
  if (!c.account.empty()) job.args.push_back("--account=" + c.account);
  job.script_path = base + ".sh";
  job.files_first = {{job.script_path, CheckScript(node, command, base + ".result")}};
  job.certify_node = node;
  return job;
}

std::map<std::string, std::string> NodeCertifier::ResultFiles() {
  std::map<std::string, std::string> out;
  if (!ctx_.config.quarantine.certify_return) return out;
  auto entries = ctx_.store.QuarantineEntries();
  if (!entries.ok()) return out;
  for (const QuarantineEntry& e : *entries)
    if (CheckInFlight(e)) out[e.node] = Base(e.node, e.last_check->started) + ".result";
  return out;
}

Effects NodeCertifier::Failed(const QuarantineEntry& e, const std::string& summary,
                              const std::string& output, WallTime now) const {
  Effects fx;
  const NodeCheck& check = *e.last_check;
  fx.Add(RecordNodeCheck{e.node, EndCheck(check, false, summary, now)});
  nlohmann::json evidence = {{"check_job", check.job_id},
                             {"check_started_ms", ToUnixMillis(check.started)},
                             {"output", output}};
  spdlog::warn("node {}: certification check {} failed: {}", e.node, check.job_id, summary);
  fx.Add(StrikeNode{e.node, "certification check failed: " + summary,
                    evidence.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "certify", false});
  return fx;
}

Effects NodeCertifier::Tick(const std::map<std::string, std::string>& found) {
  const QuarantineConfig& q = ctx_.config.quarantine;
  if (!q.certify_return) return {};
  auto entries = ctx_.store.QuarantineEntries();
  if (!entries.ok()) {
    spdlog::error("certified return: quarantine list not read: {}",
                  std::string(entries.status().message()));
    return {};
  }
  const WallTime now = ctx_.clock.Now();
  Effects fx;
  for (const QuarantineEntry& e : *entries) {
    std::optional<CheckResult> result;
    if (auto f = found.find(e.node); f != found.end() && CheckInFlight(e)) {
      auto parsed = ParseCheckResult(f->second);
      result = parsed.ok() ? *parsed : CheckResult{1, std::string(parsed.status().message())};
    }
    const CertifyDecision d = DecideCertify(e, now, q, result);
    switch (d.action) {
      case CertifyAction::kNone:
        // Stored before a stop with its sbatch unanswered: asked again, and
        // a job already submitted is found by its name.
        if (CheckInFlight(e) && e.last_check->job_id.empty() && submitting_.insert(e.node).second)
          fx.Add(CheckJob(e.node, e.last_check->started));
        break;
      case CertifyAction::kSubmit:
        if (!submitting_.insert(e.node).second) break;
        spdlog::info("node {}: quarantine over (strike {}), certification check submitted",
                     e.node, e.strikes);
        fx.Add(RecordNodeCheck{e.node, NodeCheck{"", now, std::nullopt, false, ""}});
        fx.Add(CheckJob(e.node, now));
        break;
      case CertifyAction::kPass:
        spdlog::info("node {}: certification check {} passed, on probation: {}", e.node,
                     e.last_check->job_id, d.summary);
        fx.Add(RecordNodeCheck{e.node, EndCheck(*e.last_check, true, d.summary, now)});
        fx.Add(ScheduleNow{});  // runs waiting for nodes may fit now
        break;
      case CertifyAction::kFail:
        fx += Failed(e, d.summary, result ? result->output : "", now);
        break;
      case CertifyAction::kTimedOut:
        if (!e.last_check->job_id.empty())
          fx.Add(CancelJob{e.last_check->job_id, "certification check of " + e.node +
                                                     " timed out"});
        fx += Failed(e, d.summary, "", now);
        break;
    }
  }
  return fx;
}

Effects NodeCertifier::OnSubmitted(const JobSubmitted& a) {
  const std::string& node = a.certify_node;
  submitting_.erase(node);
  std::optional<QuarantineEntry> e = EntryOf(ctx_.store, node);
  const bool wanted = e && CheckInFlight(*e);
  if (!a.job.ok()) {
    const auto code = a.job.status().code();
    // Slurm not answering says nothing of the node: the next tick asks
    // again, until the check's timeout.
    if (!wanted || code == absl::StatusCode::kUnavailable ||
        code == absl::StatusCode::kDeadlineExceeded) {
      spdlog::warn("node {}: certification check not submitted: {}", node,
                   std::string(a.job.status().message()));
      return {};
    }
    std::string why = "sbatch failed: " + std::string(a.job.status().message());
    if (why.size() > 200) why = why.substr(0, 197) + "...";
    return Failed(*e, why, "", ctx_.clock.Now());
  }
  if (wanted && e->last_check->job_id.empty()) {
    NodeCheck c = *e->last_check;
    c.job_id = *a.job;
    spdlog::info("node {}: certification check is job {}{}", node, c.job_id,
                 a.adopted.empty() ? "" : " (found by its name)");
    return RecordNodeCheck{node, c};
  }
  if (wanted && e->last_check->job_id == *a.job) return {};
  return CancelJob{*a.job, "certification check of " + node + " no longer wanted"};
}

}  // namespace trellis::controller
