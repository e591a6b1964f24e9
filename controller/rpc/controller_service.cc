#include "controller/rpc/controller_service.h"

#include <algorithm>

#include "controller/rpc/app_proto.h"
#include "controller/rpc/log_reactor.h"
#include "controller/rpc/rpc_timer.h"
#include "controller/rpc/watch_reactor.h"

namespace trellis::controller {

namespace {

// A stream refused before it began (its caller is not authenticated).
template <typename T>
class RefusedStream final : public grpc::ServerWriteReactor<T> {
 public:
  explicit RefusedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// The owner a stream's run must have: none for an admin.
std::optional<std::string> OnlyUser(const Caller& caller) {
  if (caller.admin) return std::nullopt;
  return caller.name;
}

}  // namespace

grpc::Status NotYours(const std::string& run_id, const Caller& caller) {
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "run " + run_id + " is not " + caller.name +
                          "'s: a user sees and acts on their own runs only (admins on all)");
}

namespace {

// Finishes a unary call with `status` unless it is OK: the checks at the
// top of every handler (the caller, then its fields).
bool Refused(grpc::ServerUnaryReactor* reactor, const grpc::Status& status) {
  if (status.ok()) return false;
  reactor->Finish(status);
  return true;
}

}  // namespace

void ControllerServiceImpl::IfOwnRun(const Caller& caller, const std::string& run_id,
                                     std::function<void(grpc::Status)> act) {
  if (caller.admin) return act(grpc::Status::OK);
  controller_->GetRun(run_id, [caller, run_id, act](absl::StatusOr<RunView> v) {
    if (!v.ok()) return act(ToGrpc(v.status()));
    act(v->run.user == caller.name ? grpc::Status::OK : NotYours(run_id, caller));
  });
}

grpc::ServerUnaryReactor* ControllerServiceImpl::SubmitRun(grpc::CallbackServerContext* ctx,
                                                           const v1::SubmitRunRequest* req,
                                                           v1::SubmitRunResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (Refused(reactor, Check(*req))) return reactor;
  controller_->SubmitRun(req->spec_toml(), req->dry_run(), caller->name,
                         Timed(controller_->metrics(), RpcMethod::kSubmitRun,
                               [reactor, resp](absl::StatusOr<SubmitResult> r) {
                                 if (!r.ok()) return reactor->Finish(ToGrpc(r.status()));
                                 resp->set_run_id(r->run_id);
                                 resp->set_batch_script(r->batch_script);
                                 for (const auto& a : r->sbatch_args) resp->add_sbatch_args(a);
                                 for (const auto& a : r->pool_sbatch_args)
                                   resp->add_pool_sbatch_args(a);
                                 resp->set_gate_policy_json(r->gate_policy_json);
                                 resp->set_resolved_spec(r->resolved_spec);
                                 reactor->Finish(grpc::Status::OK);
                               }));
  return reactor;
}

grpc::ServerUnaryReactor* ControllerServiceImpl::GetRun(grpc::CallbackServerContext* ctx,
                                                        const v1::GetRunRequest* req,
                                                        v1::Run* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (Refused(reactor, Check(*req))) return reactor;
  RanksQuery ranks{req->include_ranks(), req->ranks_from(), req->ranks_limit()};
  controller_->GetRun(req->run_id(),
                      Timed(controller_->metrics(), RpcMethod::kGetRun,
                            [reactor, resp, who = *caller](absl::StatusOr<RunView> v) {
                              if (!v.ok()) return reactor->Finish(ToGrpc(v.status()));
                              if (!who.admin && v->run.user != who.name)
                                return reactor->Finish(NotYours(v->run.run_id, who));
                              ToProto(*v, resp);
                              reactor->Finish(grpc::Status::OK);
                            }),
                      ranks);
  return reactor;
}

grpc::ServerUnaryReactor* ControllerServiceImpl::ListRuns(grpc::CallbackServerContext* ctx,
                                                          const v1::ListRunsRequest* req,
                                                          v1::ListRunsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (Refused(reactor, Check(*req))) return reactor;
  int limit = req->limit() == 0 ? kDefaultListRuns : req->limit();
  // A user's own runs, filtered before the limit; an admin's, everyone's.
  controller_->ListRuns(limit, req->active_only(), caller->admin ? "" : caller->name,
                        Timed(controller_->metrics(), RpcMethod::kListRuns,
                              [reactor, resp](absl::StatusOr<std::vector<RunView>> views) {
                                if (!views.ok()) return reactor->Finish(ToGrpc(views.status()));
                                for (const auto& v : *views) ToProto(v, resp->add_runs());
                                reactor->Finish(grpc::Status::OK);
                              }));
  return reactor;
}

grpc::ServerUnaryReactor* ControllerServiceImpl::CancelRun(grpc::CallbackServerContext* ctx,
                                                           const v1::CancelRunRequest* req,
                                                           v1::CancelRunResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (Refused(reactor, Check(*req))) return reactor;
  IfOwnRun(*caller, req->run_id(), [this, reactor, req, resp](grpc::Status allowed) {
    if (!allowed.ok()) return reactor->Finish(allowed);
    controller_->CancelRun(req->run_id(), req->reason(),
                           Timed(controller_->metrics(), RpcMethod::kCancelRun,
                                 [reactor, resp](absl::StatusOr<RunState> s) {
                                   if (!s.ok()) return reactor->Finish(ToGrpc(s.status()));
                                   resp->set_state(ToProto(*s));
                                   reactor->Finish(grpc::Status::OK);
                                 }));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::WatchRunEvent>* ControllerServiceImpl::WatchRun(
    grpc::CallbackServerContext* ctx, const v1::WatchRunRequest* req) {
  auto caller = auth_.Authenticate(*ctx);
  if (!caller.ok()) return new RefusedStream<v1::WatchRunEvent>(ToGrpc(caller.status()));
  if (grpc::Status bad = Check(*req); !bad.ok())
    return new RefusedStream<v1::WatchRunEvent>(bad);
  return new WatchReactor(controller_, req->run_id(), OnlyUser(*caller));
}

grpc::ServerWriteReactor<v1::LogChunk>* ControllerServiceImpl::ReadLogs(
    grpc::CallbackServerContext* ctx, const v1::ReadLogsRequest* req) {
  auto caller = auth_.Authenticate(*ctx);
  if (!caller.ok()) return new RefusedStream<v1::LogChunk>(ToGrpc(caller.status()));
  if (grpc::Status bad = Check(*req); !bad.ok()) return new RefusedStream<v1::LogChunk>(bad);
  return new LogReactor(controller_, *req, OnlyUser(*caller));
}

grpc::ServerUnaryReactor* ControllerServiceImpl::ListNodes(grpc::CallbackServerContext* ctx,
                                                           const v1::ListNodesRequest* req,
                                                           v1::ListNodesResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  controller_->ListNodes(Timed(controller_->metrics(), RpcMethod::kListNodes,
                               [reactor, resp](absl::StatusOr<std::vector<NodeStatusView>> nodes) {
                                 if (!nodes.ok()) return reactor->Finish(ToGrpc(nodes.status()));
                                 for (const auto& n : *nodes)
                                   ToProto(n, WallTime(), resp->add_nodes());
                                 reactor->Finish(grpc::Status::OK);
                               }));
  return reactor;
}

grpc::ServerUnaryReactor* ControllerServiceImpl::QuarantineNode(
    grpc::CallbackServerContext* ctx, const v1::QuarantineNodeRequest* req, v1::NodeStatus* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (!caller->admin) {
    reactor->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                 "quarantine and release are admin actions; " + caller->name +
                                     " is a user (--tokens-file)"));
    return reactor;
  }
  if (Refused(reactor, Check(*req))) return reactor;
  controller_->QuarantineNode(req->node(), req->reason(), "user:" + caller->name,
                              Timed(controller_->metrics(), RpcMethod::kQuarantineNode,
                                    [reactor, resp](absl::StatusOr<NodeStatusView> n) {
                                      if (!n.ok()) return reactor->Finish(ToGrpc(n.status()));
                                      ToProto(*n, WallTime(), resp);
                                      reactor->Finish(grpc::Status::OK);
                                    }));
  return reactor;
}

grpc::ServerUnaryReactor* ControllerServiceImpl::ReleaseNode(grpc::CallbackServerContext* ctx,
                                                             const v1::ReleaseNodeRequest* req,
                                                             v1::NodeStatus* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (!caller->admin) {
    reactor->Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                 "quarantine and release are admin actions; " + caller->name +
                                     " is a user (--tokens-file)"));
    return reactor;
  }
  if (Refused(reactor, Check(*req))) return reactor;
  controller_->ReleaseNode(req->node(), req->forget(),
                           Timed(controller_->metrics(), RpcMethod::kReleaseNode,
                                 [reactor, resp](absl::StatusOr<NodeStatusView> n) {
                                   if (!n.ok()) return reactor->Finish(ToGrpc(n.status()));
                                   ToProto(*n, WallTime(), resp);
                                   reactor->Finish(grpc::Status::OK);
                                 }));
  return reactor;
}

grpc::ServerUnaryReactor* ControllerServiceImpl::GateReport(grpc::CallbackServerContext* ctx,
                                                            const v1::GateReportRequest* req,
                                                            v1::GateReportResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (Refused(reactor, Check(*req))) return reactor;
  IfOwnRun(*caller, req->run_id(), [this, reactor, req, resp](grpc::Status allowed) {
    if (!allowed.ok()) return reactor->Finish(allowed);
    controller_->GateReport(req->run_id(), req->attempt(),
                            Timed(controller_->metrics(), RpcMethod::kGateReport,
                                  [reactor, resp](absl::StatusOr<GateReportView> r) {
                                    if (!r.ok()) return reactor->Finish(ToGrpc(r.status()));
                                    ToProto(*r, resp);
                                    reactor->Finish(grpc::Status::OK);
                                  }));
  });
  return reactor;
}

namespace {

void ToProto(const StepPointRow& p, v1::StepPoint* out) {
  out->set_attempt(p.attempt);
  out->set_launch(p.launch);
  out->set_step(p.step);
  out->set_first_step(p.first_step);
  out->set_steps(p.steps);
  out->set_ranks(p.ranks);
  out->set_loss(p.loss);
  out->set_loss_min(p.loss_min);
  out->set_loss_max(p.loss_max);
  out->set_tokens(p.tokens);
  out->set_step_seconds_sum(p.step_seconds_sum);
  out->set_step_seconds(p.step_seconds);
  out->set_step_seconds_max(p.step_seconds_max);
  // The last step's figures from its latest rank record: every optional field
  // of the record that StepPoint has a field of the same name for.
  if (p.last) CopyStepFigures(*p.last, out);
  out->set_updated_unix_ms(ToUnixMillis(p.updated));
}

}  // namespace

grpc::ServerUnaryReactor* ControllerServiceImpl::RunSteps(grpc::CallbackServerContext* ctx,
                                                          const v1::RunStepsRequest* req,
                                                          v1::RunStepsResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  auto caller = auth_.Authenticate(*ctx);
  if (Refused(reactor, ToGrpc(caller.status()))) return reactor;
  if (Refused(reactor, Check(*req))) return reactor;
  int max_points = req->max_points() == 0 ? kDefaultStepPoints : req->max_points();
  IfOwnRun(*caller, req->run_id(), [this, reactor, req, resp, max_points](grpc::Status ok) {
    if (!ok.ok()) return reactor->Finish(ok);
    controller_->RunSteps(
        req->run_id(), max_points,
        Timed(controller_->metrics(), RpcMethod::kRunSteps,
              [reactor, resp, run_id = req->run_id()](absl::StatusOr<StepSeries> s) {
                if (!s.ok()) return reactor->Finish(ToGrpc(s.status()));
                resp->set_run_id(run_id);
                resp->set_total_steps(s->total_steps);
                resp->set_steps_per_point(s->steps_per_point);
                for (const auto& p : s->points) ToProto(p, resp->add_points());
                reactor->Finish(grpc::Status::OK);
              }));
  });
  return reactor;
}

}  // namespace trellis::controller
