#pragma once
// ControllerService (users) on the gRPC callback API. Reactors never block:
// they hand the request to the Controller's loop and finish from its reply.

#include "controller/app/controller.h"
#include "controller/rpc/authenticator.h"
#include "controller/rpc/validate.h"
#include "trellis/v1/controller.grpc.pb.h"

namespace trellis::controller {

class ControllerServiceImpl final : public v1::ControllerService::CallbackService {
 public:
  ControllerServiceImpl(Controller* controller, Authenticator auth)
      : controller_(controller), auth_(std::move(auth)) {}

  grpc::ServerUnaryReactor* SubmitRun(grpc::CallbackServerContext* ctx,
                                      const v1::SubmitRunRequest* req,
                                      v1::SubmitRunResponse* resp) override;
  grpc::ServerUnaryReactor* GetRun(grpc::CallbackServerContext* ctx, const v1::GetRunRequest* req,
                                   v1::Run* resp) override;
  grpc::ServerUnaryReactor* ListRuns(grpc::CallbackServerContext* ctx,
                                     const v1::ListRunsRequest* req,
                                     v1::ListRunsResponse* resp) override;
  grpc::ServerUnaryReactor* CancelRun(grpc::CallbackServerContext* ctx,
                                      const v1::CancelRunRequest* req,
                                      v1::CancelRunResponse* resp) override;
  grpc::ServerWriteReactor<v1::WatchRunEvent>* WatchRun(grpc::CallbackServerContext* ctx,
                                                        const v1::WatchRunRequest* req) override;
  grpc::ServerWriteReactor<v1::LogChunk>* ReadLogs(grpc::CallbackServerContext* ctx,
                                                   const v1::ReadLogsRequest* req) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* ctx,
                                      const v1::ListNodesRequest* req,
                                      v1::ListNodesResponse* resp) override;
  grpc::ServerUnaryReactor* QuarantineNode(grpc::CallbackServerContext* ctx,
                                           const v1::QuarantineNodeRequest* req,
                                           v1::NodeStatus* resp) override;
  grpc::ServerUnaryReactor* ReleaseNode(grpc::CallbackServerContext* ctx,
                                        const v1::ReleaseNodeRequest* req,
                                        v1::NodeStatus* resp) override;
  grpc::ServerUnaryReactor* GateReport(grpc::CallbackServerContext* ctx,
                                       const v1::GateReportRequest* req,
                                       v1::GateReportResponse* resp) override;
  grpc::ServerUnaryReactor* RunSteps(grpc::CallbackServerContext* ctx,
                                     const v1::RunStepsRequest* req,
                                     v1::RunStepsResponse* resp) override;

 private:
  // Runs `act` once the caller may see and act on `run_id`: an admin at once,
  // a user after the run's owner is read (PERMISSION_DENIED if not theirs).
  void IfOwnRun(const Caller& caller, const std::string& run_id,
                std::function<void(grpc::Status)> act);

  Controller* controller_;
  Authenticator auth_;
};

// The refusal of a run that is not the caller's.
grpc::Status NotYours(const std::string& run_id, const Caller& caller);


}  // namespace trellis::controller
