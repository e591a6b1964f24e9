#include "worker/rpc/agent_client.h"

#include <grpcpp/create_channel.h>

#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "common/log.h"
#include "worker/rpc/agent_proto.h"

namespace trellis::worker {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::system_clock::time_point DeadlineAfter(Seconds d) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

// A try made when the window is over still gets this long: enough to connect
// to a controller that just came back, or to be told why it cannot be reached.
constexpr Seconds kLastTry{5};

// Runs `call(budget)` until it returns anything but UNAVAILABLE, or until
// `window` has passed. Before each try it waits for `channel` to connect (at
// most what is left of the window): a controller that comes back is called at
// once, not at the end of a backoff sleep. Each try gets min(per_call, what is
// left of the window, at least kLastTry) unless per_call_fixed (a gate wait
// must not shrink with the retries). The backoff only spaces tries that a
// connected controller answered with UNAVAILABLE.
grpc::Status WithRetries(const char* what, grpc::Channel& channel, const BackoffPolicy& backoff,
                         Seconds window, Seconds per_call, bool per_call_fixed,
                         const std::function<grpc::Status(Seconds)>& call) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(window);
  for (int retry = 0;; ++retry) {
    channel.WaitForConnected(DeadlineAfter(std::max(Seconds(end - Clock::now()), Seconds(0))));
    Seconds left = std::max(Seconds(end - Clock::now()), kLastTry);
    Seconds budget = per_call_fixed ? per_call : std::min(per_call, left);
    grpc::Status st = call(budget);
    if (st.error_code() != grpc::StatusCode::UNAVAILABLE) return st;
    auto delay = BackoffDelay(backoff, retry, unit(rng));
    if (Clock::now() + delay >= end) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          std::string("controller unreachable for ") +
                              std::to_string(static_cast<int>(window.count())) +
                              " s: " + st.error_message());
    }
    spdlog::info("{}: controller unavailable ({}); retrying in {} ms", what, st.error_message(),
                 delay.count());
    // A plain sleep: nothing else runs on this thread before or after the loop.
    std::this_thread::sleep_for(delay);
  }
}

}  // namespace

std::shared_ptr<grpc::Channel> ControllerChannel(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  // Reconnect quickly once the controller is back.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  return grpc::CreateCustomChannel(address, std::move(credentials), args);
}

AgentClient::AgentClient(std::shared_ptr<grpc::Channel> channel, v1::WorkerIdentity id,
                         BackoffPolicy backoff)
    : channel_(channel),
      stub_(v1::AgentService::NewStub(channel)),
      id_(std::move(id)),
      backoff_(backoff) {}

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
      WithRetries("Register", *channel_, backoff_, retry_window, gate_wait, true, [&](Seconds budget) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAfter(budget));
        return stub_->Register(&ctx, req, &decision);
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
      WithRetries("ReportExit", *channel_, backoff_, timeout, timeout, false, [&](Seconds budget) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAfter(budget));
        v1::ReportExitResponse resp;
        return stub_->ReportExit(&ctx, report, &resp);
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
      WithRetries("NextLaunch", *channel_, backoff_, timeout, timeout, false, [&](Seconds budget) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAfter(budget));
        return stub_->NextLaunch(&ctx, req, &resp);
      });
  if (!st.ok()) return FromGrpc(st);
  NextLaunchChoice c;
  switch (resp.action()) {
    case v1::NextLaunchResponse::ACTION_RELAUNCH:
      c.relaunch = true;
      c.next_launch = resp.next_launch();
      c.nodes.assign(resp.nodes().begin(), resp.nodes().end());
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
