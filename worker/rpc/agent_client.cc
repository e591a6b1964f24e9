#include "worker/rpc/agent_client.h"

#include <chrono>
#include <functional>
#include <random>

#include "common/log.h"
#include "worker/rpc/agent_proto.h"
#include "worker/rpc/call_retry.h"

namespace trellis::worker {
namespace {

// gRPC's deadlines are its own real time, whatever clock times the retries.
std::chrono::system_clock::time_point DeadlineAfter(Seconds d) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

}  // namespace

AgentClient::AgentClient(std::shared_ptr<ControllerLink> link, v1::WorkerIdentity id,
                         Clock& clock, BackoffPolicy backoff)
    : link_(std::move(link)),
      id_(std::move(id)),
      clock_(clock),
      backoff_(backoff) {}

grpc::Status AgentClient::WithRetries(const char* what, const RetryLimits& limits,
                                      const std::function<grpc::Status(Seconds)>& call) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return CallWithRetries(
      what, clock_, backoff_, limits, [this](Seconds left) { link_->WaitConnected(left); }, call,
      [&] { return unit(rng); });
}

absl::StatusOr<GateResult> AgentClient::Register(const NodeFacts& facts, Seconds retry_window,
                                                 Seconds gate_wait) {
  v1::RegisterRequest req;
  *req.mutable_id() = id_;
  req.set_version(facts.version);
  req.set_hostname(facts.hostname);
  req.set_gpus(facts.gpus);
  req.set_cpus(facts.cpus);
  req.set_slurm_job_id(facts.slurm_job_id);
  req.set_slurm_step_id(facts.slurm_step_id);
  req.set_metrics_addr(facts.metrics_addr);
  ToProto(facts.probe, req.mutable_probe());
  v1::GateDecision decision;
  grpc::Status st =
      WithRetries("Register", {retry_window, gate_wait, true}, [&](Seconds budget) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAfter(budget));
        return link_->stub()->Register(&ctx, req, &decision);
      });
  if (!st.ok()) return FromGrpc(st);
  GateResult r;
  r.reason = decision.reason();
  switch (decision.decision()) {
    case v1::GateDecision::DECISION_GO:
      r.kind = GateResult::kGo;
      r.go = GoFromProto(decision);
      break;
    case v1::GateDecision::DECISION_STANDBY:
      r.kind = GateResult::kStandby;
      break;
    case v1::GateDecision::DECISION_ABORT:
      r.kind = GateResult::kAbort;
      break;
    default:
      return absl::InvalidArgumentError("the controller answered Register with decision " +
                                        std::to_string(decision.decision()));
  }
  return r;
}

v1::ReportExitRequest AgentClient::FinalReport(const std::vector<RankExit>& exits,
                                               const WorkerOutcome& outcome, int oom_kills,
                                               const std::string& planned_stop) const {
  v1::ReportExitRequest req;
  *req.mutable_id() = id_;
  for (const RankExit& e : exits) ToProto(e, req.add_ranks());
  req.set_exit_code(outcome.exit_code);
  req.set_reason(outcome.reason);
  req.set_oom_kills(oom_kills);
  req.set_planned_stop(planned_stop);
  return req;
}

absl::Status AgentClient::ReportExit(const v1::ReportExitRequest& report, Seconds timeout) {
  grpc::Status st =
      WithRetries("ReportExit", {timeout, timeout, false}, [&](Seconds budget) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAfter(budget));
        v1::ReportExitResponse resp;
        return link_->stub()->ReportExit(&ctx, report, &resp);
      });
  return FromGrpc(st);
}

absl::StatusOr<NextLaunchChoice> AgentClient::NextLaunch(const NextLaunchAsk& ask,
                                                        Seconds timeout) {
  v1::NextLaunchRequest req;
  *req.mutable_id() = id_;
  req.set_step_exit_code(ask.step_exit_code);
  req.set_requeue_count(ask.requeue_count);
  req.set_allocation_nodelist(ask.allocation_nodelist);
  req.set_terminated_by_slurm(ask.terminated_by_slurm);
  req.set_time_limit_warned(ask.time_limit_warned);
  v1::NextLaunchResponse resp;
  grpc::Status st =
      WithRetries("NextLaunch", {timeout, timeout, false}, [&](Seconds budget) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAfter(budget));
        return link_->stub()->NextLaunch(&ctx, req, &resp);
      });
  if (!st.ok()) return FromGrpc(st);
  NextLaunchChoice c;
  switch (resp.action()) {
    case v1::NextLaunchResponse::ACTION_RELAUNCH:
      c.relaunch = true;
      c.next_launch = resp.next_launch();
      c.nodes.assign(resp.nodes().begin(), resp.nodes().end());
      for (const auto& job : resp.other_jobs())
        c.other_jobs.push_back({job.job_id(), {job.nodes().begin(), job.nodes().end()}});
      break;
    case v1::NextLaunchResponse::ACTION_EXIT:
      c.exit_code = resp.exit_code();
      break;
    default:
      return absl::InvalidArgumentError("the controller answered NextLaunch with action " +
                                        std::to_string(resp.action()));
  }
  if (!resp.reason().empty()) spdlog::info("controller: {}", resp.reason());
  return c;
}

}  // namespace trellis::worker
