#include "controller/rpc/agent_service.h"

#include <mutex>

#include "common/log.h"
#include "controller/app/scrape_targets.h"
#include "controller/rpc/convert.h"
#include "controller/rpc/rpc_timer.h"

namespace trellis::controller {

namespace {

// Bounds on untrusted identity fields, checked before anything is looked up.
grpc::Status CheckIdentity(const v1::WorkerIdentity& id) {
  auto bad = [](const std::string& what) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what);
  };
  if (id.run_id().empty() || id.run_id().size() > 128) return bad("id.run_id: 1..128 characters");
  if (id.attempt() < 1) return bad("id.attempt: must be >= 1");
  if (id.launch() < 1) return bad("id.launch: must be >= 1");
  if (id.node().empty() || id.node().size() > 255) return bad("id.node: 1..255 characters");
  if (id.secret().size() > 256) return bad("id.secret: at most 256 characters");
  return grpc::Status::OK;
}

bool SameIdentity(const v1::WorkerIdentity& a, const v1::WorkerIdentity& b) {
  return a.run_id() == b.run_id() && a.attempt() == b.attempt() && a.launch() == b.launch() &&
         a.node() == b.node() && a.secret() == b.secret();
}

// A worker's stream: authenticated on its first report, every later report
// must carry the same identity.
class StepStreamReactor final : public grpc::ServerReadReactor<v1::AgentReport> {
 public:
  explicit StepStreamReactor(Controller* controller) : controller_(controller) {
    StartRead(&report_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);  // the worker closed its side
    if (!authenticated_) {
      grpc::Status st = CheckIdentity(report_.id());
      if (!st.ok()) return Finish(st);
      identity_ = report_.id();
      controller_->AuthenticateWorker(FromProto(identity_), [this](absl::StatusOr<bool> r) {
        if (!r.ok()) return Finish(ToGrpc(r.status()));
        authenticated_ = true;
        Handle();
      });
      return;
    }
    if (!SameIdentity(identity_, report_.id()))
      return Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                 "id: differs from the stream's first report"));
    Handle();
  }

  void OnDone() override { delete this; }

 private:
  void Handle() {
    WorkerId id = FromProto(identity_);
    switch (report_.body_case()) {
      case v1::AgentReport::kStep:
        controller_->RecordStep(id, report_.step().rank(),
                                trellis::FromProto(report_.step().record()));
        break;
      case v1::AgentReport::kRankExit:
        controller_->RecordRankExit(id, FromProto(report_.rank_exit(), id.node));
        break;
      case v1::AgentReport::kHeartbeat:
        controller_->Heartbeat(id);
        break;
      default:  // a report of a newer worker: ignored
        break;
    }
    StartRead(&report_);
  }

  Controller* controller_;
  v1::AgentReport report_;
  v1::WorkerIdentity identity_;
  bool authenticated_ = false;
};

}  // namespace

grpc::ServerUnaryReactor* AgentServiceImpl::Register(grpc::CallbackServerContext* ctx,
                                                     const v1::RegisterRequest* req,
                                                     v1::GateDecision* resp) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status st = CheckIdentity(req->id());
  if (!st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  if (req->probe().sockets_size() > 1024 || req->probe().device_nodes_size() > 1024 ||
      req->hostname().size() > 255) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "probe: at most 1024 sockets and device nodes; hostname: at most "
                                 "255 characters"));
    return reactor;
  }
  // They name a Slurm step on scancel's command line: digits only.
  auto is_id = [](const std::string& s) {
    return s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!is_id(req->slurm_job_id()) || !is_id(req->slurm_step_id())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "slurm_job_id, slurm_step_id: digits only, at most 20"));
    return reactor;
  }
  // Only a scrape target's address: anything else is dropped, not refused
  // (metrics are not worth failing a launch for).
  std::string metrics_addr = req->metrics_addr();
  if (!metrics_addr.empty() && !IsHostPort(metrics_addr)) {
    spdlog::debug(
        "run {}: node {}: metrics_addr is not HOST:PORT (at most 255 characters); "
        "ignored",
        req->id().run_id(), req->id().node());
    metrics_addr.clear();
  }
  controller_->Register(
      FromProto(req->id()), req->version(), req->hostname(), ProbeFromWorker(req->probe()),
      SlurmStep{req->slurm_job_id(), req->slurm_step_id()}, std::move(metrics_addr),
      Timed(controller_->metrics(), RpcMethod::kRegister,
            [reactor, resp](absl::StatusOr<GateAnswer> a) {
              if (!a.ok()) return reactor->Finish(ToGrpc(a.status()));
              ToProto(*a, resp);
              reactor->Finish(grpc::Status::OK);
            }));
  return reactor;
}

grpc::ServerReadReactor<v1::AgentReport>* AgentServiceImpl::StreamSteps(
    grpc::CallbackServerContext* ctx, v1::StreamStepsResponse* resp) {
  return new StepStreamReactor(controller_);
}

grpc::ServerUnaryReactor* AgentServiceImpl::ReportExit(grpc::CallbackServerContext* ctx,
                                                       const v1::ReportExitRequest* req,
                                                       v1::ReportExitResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status st = CheckIdentity(req->id());
  if (!st.ok() || req->ranks_size() > 4096) {
    reactor->Finish(st.ok() ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                           "ranks: at most 4096 entries")
                            : st);
    return reactor;
  }
  std::vector<RankExitInfo> exits;
  for (const auto& r : req->ranks()) exits.push_back(FromProto(r, req->id().node()));
  controller_->ReportExit(
      FromProto(req->id()), std::move(exits), req->oom_kills(), req->exit_code(),
      req->reason().substr(0, 1024),
      Timed(controller_->metrics(), RpcMethod::kReportExit,
            [reactor](absl::StatusOr<bool> r) { reactor->Finish(ToGrpc(r.status())); }));
  return reactor;
}

grpc::ServerUnaryReactor* AgentServiceImpl::NextLaunch(grpc::CallbackServerContext* ctx,
                                                       const v1::NextLaunchRequest* req,
                                                       v1::NextLaunchResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  grpc::Status st = CheckIdentity(req->id());
  if (!st.ok()) {
    reactor->Finish(st);
    return reactor;
  }
  controller_->NextLaunch(FromProto(req->id()), req->step_exit_code(),
                          Timed(controller_->metrics(), RpcMethod::kNextLaunch,
                                [reactor, resp](absl::StatusOr<NextLaunchAnswer> a) {
                                  if (!a.ok()) return reactor->Finish(ToGrpc(a.status()));
                                  ToProto(*a, resp);
                                  reactor->Finish(grpc::Status::OK);
                                }));
  return reactor;
}

}  // namespace trellis::controller
